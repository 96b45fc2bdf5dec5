// The data path of an IetfSession, both ways: DownstreamSubscription (the origin's track out to
// the peer on SUBGROUP streams, and in OBJECT_DATAGRAMs what arrived in them) and SubgroupReader (a peer's SUBGROUP stream into the track of its
// alias), declared in ietf_handlers.h. Moved from ietf_session.cc unchanged.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "session/ietf_datagram.h"
#include "session/ietf_handlers.h"
#include "wire/ietf_properties.h"

namespace moqd::session::ietf_detail {

std::string track_properties_block(const wi::Draft& row, const model::TrackProperties& p) {
  // d17+ (LOC TIMESCALE 0x08 in the Properties registry; d18 §15 lists it): a declared TIMESCALE
  // is what makes @moq/net 0.3.4 read object Timestamps at all. A block of one pair, type 0x08
  // first, so its delta from 0 is the type itself.
  if (!p.timescale_known || row.number < 17) {
    return {};
  }
  std::vector<uint8_t> block;
  wi::write_varint(row.varint_form, 0x08, block);
  wi::write_varint(row.varint_form, p.timescale, block);
  return std::string(block.begin(), block.end());
}

void object_timestamp_block(const wi::Draft& row, uint64_t timestamp, std::vector<uint8_t>& out) {
  out.clear();
  wi::write_varint(row.varint_form, 0x10, out);
  wi::write_varint(row.varint_form, timestamp, out);
}

bool DownstreamSubscription::send_ok() {
  if (!ok_ && !publish_) {
    return true;
  }
  std::optional<model::TrackProperties> p;
  if (track_ != nullptr) {
    p = track_->properties();
    if (!p) {
      return false;  // on_track_data calls pump() again when they are set
    }
  }
  // A declared TIMESCALE: every object then carries a Timestamp (write_group).
  if (p) {
    const std::string block = track_properties_block(session_.row(), *p);
    (ok_ ? ok_->track_extensions : publish_->track_extensions).assign(block.begin(), block.end());
    stamp_ = !block.empty();
  }
  if (ok_) {
    session_.send_control(*ok_);
    ok_.reset();
  } else {
    session_.send_control(*publish_);
    publish_.reset();
  }
  return true;
}

void DownstreamSubscription::pump() {
  if (session_.is_closed() || done_sent_) {
    return;
  }
  if (!send_ok() || awaiting_answer_) {
    return;
  }
  finished_in_pump_ = false;
  if (track_ != nullptr) {
    // New groups, oldest first; a subscriber that falls behind past 32 open groups loses the
    // oldest (reset), as the moq-lite subscriptions skip ahead.
    track_->for_each_group_from(next_arrival_, [&](const model::GroupRef& g) {
      next_arrival_ = g->arrival() + 1;
      if (last_group_ && g->sequence() > *last_group_) {
        past_end_ = true;
        return;
      }
      if (forward_) {
        writers_.push_back(std::make_unique<Writer>(*this, g));
      }
    });
    while (writers_.size() > 32) {
      reset_writer(*writers_.front(), ErrorCode::kOld);
      writers_.pop_front();
    }
  }
  for (auto it = writers_.begin(); it != writers_.end();) {
    Writer& w = **it;
    if (w.stopped) {
      reset_writer(w, ErrorCode::kCancel);
      it = writers_.erase(it);
      continue;
    }
    if (w.stream == nullptr && !w.on_stream) {
      const DatagramStep d = send_datagrams(w);
      if (d == DatagramStep::kWait) {
        ++it;
        continue;
      }
      if (d == DatagramStep::kDone) {
        if (last_group_ && w.cursor.group()->sequence() >= *last_group_) {
          past_end_ = true;
        }
        it = writers_.erase(it);
        continue;
      }
    }
    if (w.stream == nullptr) {
      transport::Stream* s = session_.open_uni();
      if (s == nullptr) {
        session_.wait_for_streams(this);
        break;
      }
      w.stream = s;
      s->set_visitor(&w);
      s->set_send_order(w.cursor.group()->sequence());
      ++streams_opened_;
      wi::SubgroupHeader h = subgroup_header(*w.cursor.group(), w.datagrams == 0);
      h.track_alias = alias();
      h.group = w.cursor.group()->sequence();
      h.subgroup = w.cursor.group()->subgroup();
      h.publisher_priority = priority_;
      std::vector<uint8_t> out;
      wi::encode(session_.draft(), h, out);
      s->write(Bytes::from(out));
    }
    if (write_group(w)) {
      if (last_group_ && w.cursor.group()->sequence() >= *last_group_) {
        past_end_ = true;
      }
      it = writers_.erase(it);
      continue;
    }
    ++it;
  }
  // Only the track's end on 14-16 waits: SUBSCRIPTION_ENDED answers a SUBSCRIBE_UPDATE (which
  // @moq/net does not send), and on 17+ @moq/net reads nothing after SUBSCRIBE_OK.
  const bool finishing = ended_ && !past_end_ && writers_.empty() && !done_sent_ &&
                         session_.draft() <= wire::Version::kTransport16;
  if (!finishing) {
    drained();
  } else if (wait_drain()) {
    return;
  }
  if (past_end_ && writers_.empty() && !done_sent_) {
    // d14 §9.12 SUBSCRIPTION_ENDED: the end group of a SUBSCRIBE_UPDATE was reached.
    stop_listening();
    wi::PublishDone d{request_id_, kDoneSubscriptionEnded, streams_opened_, "end group reached"};
    session_.send_control(d);
    done();
    return;
  }
  if (ended_ && writers_.empty() && !done_sent_) {
    done_sent_ = true;
    const bool clean = end_reason_.code == ErrorCode::kCancel || end_reason_.code == ErrorCode::kClosed;
    wi::PublishDone d{request_id_, clean ? kDoneTrackEnded : kDoneInternal, streams_opened_,
                      error_code_name(end_reason_.code)};
    session_.send_control(d);
    session_.await_unsubscribe(request_id_);
    done();
  }
}

void DownstreamSubscription::narrow(const Narrowing& n) {
  if (n.priority) {
    priority_ = *n.priority;
  }
  if (n.forward) {
    forward_ = *n.forward;
  }
  if (n.set_end) {
    last_group_ = n.last_group;
    past_end_ = false;
  }
  if (last_group_) {
    // Groups past the new end stop here (objects already sent may still arrive, d14 §9.10).
    for (auto it = writers_.begin(); it != writers_.end();) {
      if ((*it)->cursor.group()->sequence() > *last_group_) {
        reset_writer(**it, ErrorCode::kCancel);
        it = writers_.erase(it);
        past_end_ = true;
      } else {
        ++it;
      }
    }
    if (track_ != nullptr && track_->largest_sequence() && *track_->largest_sequence() > *last_group_) {
      past_end_ = true;
    }
  }
  pump();
}

model::Track* subscription_track(const DownstreamSubscription& s) { return s.track(); }
std::optional<wi::Location> subscription_largest(const DownstreamSubscription& s) {
  return s.largest_at_start();
}
bool subscription_is_largest_object(const DownstreamSubscription& s) {
  return s.is_largest_filter();
}
std::optional<uint64_t> subscription_last_group(const DownstreamSubscription& s) {
  return s.last_group();
}
void narrow_subscription(DownstreamSubscription& s, const Narrowing& n) { s.narrow(n); }
bool subscription_forward(const DownstreamSubscription& s) { return s.forward(); }

wi::SubgroupHeader DownstreamSubscription::subgroup_header(const model::Group& g,
                                                          bool from_first) const {
  // d18+: FIRST_OBJECT (0x40), the stream starts with the subgroup's first object (@moq/net drops
  // a d18+ subgroup stream without it as one that starts partway through). The subgroup field
  // only when it is not 0; extension blocks when the producer's stream had them.
  wi::SubgroupHeader h;
  h.type = wi::subgroup_type(g.has_extensions() || stamp_, g.subgroup() != 0, true, true,
                             session_.row().first_object_bit && from_first);
  return h;
}

bool DownstreamSubscription::drained() {
  const bool receipt = session_.draft() <= wire::Version::kTransport16;
  std::erase_if(draining_, [receipt](transport::Stream* st) {
    if (st->buffered() > 0 || (receipt && st->receipt_pending())) {
      return false;
    }
    st->set_visitor(nullptr);
    st->release();
    return true;
  });
  return draining_.empty();
}

void DownstreamSubscription::on_stream_drained() {
  if (ended_) {
    pump();  // the end may wait for this stream
  } else {
    drained();
  }
}

bool DownstreamSubscription::wait_drain() {
  if (drain_gave_up_) {
    return false;
  }
  const bool all_drained = drained();
  if (!all_drained || finished_in_pump_) {
    settle_due_ = settle_due_ || unconfirmed_;
    if (!drain_bound_armed_) {
      drain_bound_armed_ = true;
      drain_deadline_ = session_.timers().schedule(kDrainBound, [this] {
        drain_deadline_ = 0;
        drain_gave_up_ = true;
        pump();
      });
    }
  }
  if (!all_drained) {
    return true;  // the stream's on_sent() pumps again
  }
  if (!settle_due_) {
    return false;
  }
  if (settle_timer_ == 0) {
    settle_timer_ = session_.timers().schedule(kSettle, [this] {
      settle_timer_ = 0;
      settle_due_ = false;
      pump();
    });
  }
  return true;
}

bool DownstreamSubscription::write_group(Writer& w) {
  static constexpr size_t kChunk = 16 * 1024;
  const wi::SubgroupHeader h = subgroup_header(*w.cursor.group(), w.datagrams == 0);
  while (w.stream != nullptr) {
    size_t cap = w.stream->write_capacity();
    if (cap == 0) {
      return false;
    }
    auto kind = w.cursor.next(std::min(cap, kChunk), w.step);
    switch (kind) {
      case model::GroupCursor::Kind::kNothing:
        return false;
      case model::GroupCursor::Kind::kObjectStart: {
        const model::Object& o = *w.step.object;
        wi::ObjectHeader oh;
        uint64_t expected = w.previous_object ? *w.previous_object + 1 : 0;
        oh.id_delta = o.id - expected;
        w.previous_object = o.id;
        oh.payload_length = o.size;
        oh.status = 0;
        if (!object_properties(o, oh.extensions)) {
          MOQD_LOG(kInfo, "session %llu subscription %llu group %llu: object %llu's extensions "
                   "cannot be written in draft %u; the group is reset",
                   static_cast<unsigned long long>(session_.id()),
                   static_cast<unsigned long long>(request_id_),
                   static_cast<unsigned long long>(w.cursor.group()->sequence()),
                   static_cast<unsigned long long>(o.id), session_.row().number);
          reset_writer(w, ErrorCode::kUnsupported);
          return true;
        }
        if (o.unreliable) {
          ++session_.datagram_stats().stream_fallbacks;
          if (TrafficCounters* tc = session_.config().traffic) {
            tc->datagram_stream_fallbacks.add();
          }
        }
        std::vector<uint8_t> out;
        wi::encode_object(session_.draft(), h, oh, out);
        w.stream->write(Bytes::from(out));
        if (TrafficCounters* tc = session_.config().traffic) {
          tc->frames_out.add();
        }
        break;
      }
      case model::GroupCursor::Kind::kChunk:
        if (TrafficCounters* tc = session_.config().traffic) {
          tc->bytes_out.add(w.step.chunk.size());
        }
        if (track_ != nullptr) {
          track_->note_bytes_out(w.step.chunk.size());
        }
        w.stream->write(std::move(w.step.chunk));
        break;
      case model::GroupCursor::Kind::kEnd:
        w.stream->finish();
        finished_in_pump_ = true;
        unconfirmed_ = unconfirmed_ || !w.stream->confirms_receipt();
        if (w.stream->buffered() > 0 ||
            (session_.draft() <= wire::Version::kTransport16 && w.stream->receipt_pending())) {
          w.stream->set_visitor(&drain_watch_);  // its on_sent() / on_received() releases it
          draining_.push_back(w.stream);
        } else {
          w.stream->set_visitor(nullptr);
          w.stream->release();
        }
        w.stream = nullptr;
        return true;
      case model::GroupCursor::Kind::kAborted:
        reset_writer(w, ErrorCode::kCancel);
        return true;
    }
  }
  return true;
}

bool DownstreamSubscription::object_properties(const model::Object& o, std::string& out) {
  out.clear();
  if (!o.extensions.empty()) {
    // The producer's block as it came when both drafts write it alike, else the same pairs in
    // this draft's form.
    const wi::Draft* from = wi::draft(static_cast<wire::Version>(0xff000000u + o.extensions_draft));
    std::span<const uint8_t> raw(o.extensions.data(), o.extensions.size());
    if (from != nullptr && wi::same_property_encoding(*from, session_.row())) {
      out.assign(reinterpret_cast<const char*>(raw.data()), raw.size());
      return true;
    }
    std::vector<uint8_t> block;
    if (from == nullptr || !wi::transcode_properties(*from, session_.row(), raw, block)) {
      return false;
    }
    out.assign(block.begin(), block.end());
  } else if (stamp_) {
    // LOC Timestamp (0x10), in the TIMESCALE declared: at most 10 bytes, written into the
    // subscription's scratch and held inline by the string (no allocation per object).
    object_timestamp_block(session_.row(), o.timestamp, stamp_scratch_);
    out.assign(reinterpret_cast<const char*>(stamp_scratch_.data()), stamp_scratch_.size());
  }
  return true;
}

DownstreamSubscription::DatagramStep DownstreamSubscription::send_datagrams(Writer& w) {
  using Kind = model::GroupCursor::Kind;
  const size_t room = session_.max_datagram_size();
  if (room == 0) {
    w.on_stream = true;
    return DatagramStep::kStream;
  }
  const model::Group& g = *w.cursor.group();
  for (;;) {
    const model::GroupCursor::Step st = w.cursor.peek(SIZE_MAX);
    if (st.kind == Kind::kNothing) {
      // An empty group waits for its first object to say which way it goes.
      return DatagramStep::kWait;
    }
    if ((st.kind == Kind::kEnd || st.kind == Kind::kAborted) && w.datagrams > 0) {
      if (st.kind == Kind::kEnd && !w.datagram_ended) {
        datagram_scratch_.clear();
        encode_end_of_group_datagram(session_.draft(), alias(), g.sequence(), w.last_datagram + 1,
                                     priority_, datagram_scratch_);
        if (session_.send_datagram(datagram_scratch_)) {
          ++session_.datagram_stats().sent;
        }
      }
      w.cursor.advance(st);
      return DatagramStep::kDone;
    }
    if (st.kind != Kind::kObjectStart || !st.object->unreliable) {
      break;  // an empty group (header and FIN, as ever), or a reliable object
    }
    const model::Object& o = *st.object;
    if (!o.is_complete()) {
      return DatagramStep::kWait;
    }
    std::string props;
    if (!object_properties(o, props)) {
      break;  // write_group refuses it
    }
    const bool last = g.is_finished() && &o == &g.objects().back();
    datagram_scratch_.clear();
    if (!encode_object_datagram(session_.draft(), alias(), g.sequence(), o, priority_, props,
                                last, datagram_scratch_) ||
        datagram_scratch_.size() > room || !session_.send_datagram(datagram_scratch_)) {
      break;
    }
    ++session_.datagram_stats().sent;
    if (TrafficCounters* tc = session_.config().traffic) {
      tc->datagrams_forwarded.add();
      tc->frames_out.add();
      tc->bytes_out.add(o.size);
    }
    if (track_ != nullptr) {
      track_->note_bytes_out(o.size);
    }
    w.cursor.advance(st);
    for (bool whole = st.completes_object; !whole;) {
      const model::GroupCursor::Step c = w.cursor.peek(SIZE_MAX);
      if (c.kind != Kind::kChunk) {
        break;
      }
      w.cursor.advance(c);
      whole = c.completes_object;
    }
    ++w.datagrams;
    w.last_datagram = o.id;
    w.datagram_ended = last;
  }
  w.on_stream = true;
  return DatagramStep::kStream;
}

// ---------------------------------------------------------------------------------------------

std::optional<uint64_t> SubgroupReader::object_timestamp(const std::string& ext) const {
  // Key-Value-Pairs to the end of the block: even types a varint, odd types length + bytes;
  // types delta-coded from draft 16 on.
  const wi::VarintForm f = session_.row().varint_form;
  std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(ext.data()), ext.size());
  std::optional<uint64_t> ts;
  uint64_t prev = 0;
  while (!in.empty()) {
    auto t = wi::read_varint(f, in);
    if (!t || !t->has_value()) {
      return std::nullopt;
    }
    in = in.subspan((*t)->consumed);
    uint64_t type = session_.row().delta_types ? prev + (*t)->value : (*t)->value;
    prev = type;
    auto v = wi::read_varint(f, in);
    if (!v || !v->has_value()) {
      return std::nullopt;
    }
    in = in.subspan((*v)->consumed);
    if ((type & 1) != 0 || (type != 0x10 && type != 0x06)) {
      return std::nullopt;  // another property: not carried
    }
    ts = (*v)->value;
  }
  return ts;
}

bool SubgroupReader::open_group(uint64_t subgroup) {
  model::Track* t = session_.upstream_track(*alias_);
  if (t == nullptr) {
    refuse(ErrorCode::kCancel, "no live subscription for this track alias");
    return false;
  }
  model::Group* g = t->begin_group(header_->group, subgroup, header_->has_extensions());
  if (g == nullptr) {
    refuse(ErrorCode::kDuplicate, "group already cached");
    return false;
  }
  group_ = model::GroupRef(g);
  counted_ = true;
  session_.upstream_reader(*alias_, true);
  return true;
}

void SubgroupReader::on_readable() {
  if (stream_ == nullptr || session_.is_closed()) {
    return;
  }
  const wire::Version v = session_.draft();
  if (!header_) {
    auto data = stream_->peek();
    auto t = wi::read_varint(session_.row().varint_form, data);
    if (!t) {
      session_.fail(t.error());
      return;
    }
    if (!t->has_value()) {
      return;
    }
    if (!wi::is_subgroup_type(v, (*t)->value)) {
      // FETCH_HEADER (0x05) and anything else: moqd serves no FETCH and sends none.
      session_.fail(wi::TerminationCode::kProtocolViolation, "unexpected uni stream type");
      return;
    }
    auto h = wi::decode_subgroup_header(v, data, session_.limits());
    if (!h) {
      session_.fail(h.error());
      return;
    }
    if (!h->has_value()) {
      if (stream_->has_peer_fin()) {
        session_.fail(make_error(ErrorCode::kDecode, "truncated SUBGROUP_HEADER"));
      }
      return;
    }
    stream_->consume((*h)->consumed);
    header_ = (*h)->value;
    alias_ = header_->track_alias;
  }
  if (!group_ && !waited_) {
    if (session_.hold_subgroup(this, *alias_)) {
      // Its SUBSCRIBE_OK may still be on its way on the control stream: held unread until then.
      return;
    }
    waited_ = true;
    // Each subgroup is a Group of its own in the model. One whose id is its first object's
    // (types 0x12/0x13/0x1A/0x1B) is opened when that object's header arrives.
    const uint64_t subgroup = header_->has_subgroup_field() ? header_->subgroup : 0;
    if (!header_->subgroup_is_first_object() && !open_group(subgroup)) {
      return;
    }
  }
  model::Track* t = track();
  if (t == nullptr) {
    refuse(ErrorCode::kCancel, "subscription ended");
    return;
  }
  while (stream_ != nullptr) {
    auto data = stream_->peek();
    if (!in_payload_) {
      if (data.empty()) {
        break;
      }
      auto o = wi::decode_object(v, *header_, data, session_.limits());
      if (!o) {
        session_.fail(o.error());
        return;
      }
      if (!o->has_value()) {
        if (stream_->has_peer_fin()) {
          // A FIN inside an object header: is_fin_received() would never turn true with the
          // header's first bytes unread, so the group ends here and the header is truncated.
          if (group_) {
            t->abort_group(*group_);
            group_ = model::GroupRef();
          }
          session_.fail(make_error(ErrorCode::kDecode, "object header cut short by FIN"));
        }
        return;
      }
      const wi::ObjectHeader& oh = (*o)->value;
      auto id = wi::object_id(previous_object_, oh.id_delta);
      if (!id) {
        session_.fail(wi::TerminationCode::kProtocolViolation, "object id overflow");
        return;
      }
      if (!group_ && !open_group(*id)) {
        return;
      }
      if (oh.payload_length > session_.config().limits.max_frame_size) {
        refuse(ErrorCode::kWrongSize, "object over --max-frame-size");
        return;
      }
      stream_->consume((*o)->consumed);
      previous_object_ = *id;
      if (oh.payload_length == 0 && oh.status != 0) {
        if (oh.status == static_cast<uint64_t>(model::ObjectStatus::kEndOfGroup) ||
            oh.status == static_cast<uint64_t>(model::ObjectStatus::kEndOfTrack)) {
          continue;  // the group's end: its FIN follows
        }
        refuse(ErrorCode::kUnsupported, "object status moq-lite cannot carry");
        return;
      }
      if (TrafficCounters* tc = session_.config().traffic) {
        tc->frames_in.add();
      }
      // The extension block is kept as it came, for IETF subscribers. moq-lite carries one
      // property of it: the presentation timestamp (LOC Timestamp 0x10, or 0x06 of loc-03), which
      // @moq/net writes on every object and moq-lite-05 FRAMEs carry; a block with anything else
      // marks the object one that moq-lite subscribers refuse.
      model::Track::IetfObject in;
      in.id = *id;
      in.size = oh.payload_length;
      if (!oh.extensions.empty()) {
        in.extensions = Bytes::copy(std::string_view(oh.extensions));
        in.extensions_draft = session_.row().number;
        in.timestamp = object_timestamp(oh.extensions);
        in.lite_refused = !in.timestamp;
      }
      t->begin_ietf_object(*group_, std::move(in));
      payload_left_ = oh.payload_length;
      in_payload_ = payload_left_ > 0;
      continue;
    }
    if (data.empty()) {
      break;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(payload_left_, data.size()));
    if (!session_.admit_ingress(n)) {
      return;
    }
    if (TrafficCounters* tc = session_.config().traffic) {
      tc->bytes_in.add(n);
    }
    Bytes chunk = stream_->read(n);
    payload_left_ -= n;
    in_payload_ = payload_left_ > 0;
    t->append_chunk(*group_, std::move(chunk));
  }
  if (stream_ != nullptr && stream_->is_fin_received()) {
    if (group_) {
      if (in_payload_) {
        t->abort_group(*group_);
      } else {
        t->finish_group(*group_);
      }
    }
    group_ = model::GroupRef();
    done();
  }
}

}  // namespace moqd::session::ietf_detail

// OBJECT_DATAGRAM receive of an IetfSession. See ietf_datagram.h.
#include "session/ietf_datagram.h"

#include <optional>
#include <string>

#include "base/log.h"
#include "wire/ietf_datagram.h"

namespace moqd::session::ietf_detail {

namespace wi = wire::ietf;

namespace {

// The timestamp of an extension block that holds only a Timestamp property (LOC 0x10, loc-03's
// 0x06); nullopt otherwise. The same rule as the SubgroupReader's for stream objects.
std::optional<uint64_t> timestamp_of(const wi::Draft& d, const std::string& ext) {
  std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(ext.data()), ext.size());
  std::optional<uint64_t> ts;
  uint64_t prev = 0;
  while (!in.empty()) {
    auto t = wi::read_varint(d.varint_form, in);
    if (!t || !t->has_value()) {
      return std::nullopt;
    }
    in = in.subspan((*t)->consumed);
    const uint64_t type = d.delta_types ? prev + (*t)->value : (*t)->value;
    prev = type;
    auto v = wi::read_varint(d.varint_form, in);
    if (!v || !v->has_value()) {
      return std::nullopt;
    }
    in = in.subspan((*v)->consumed);
    if ((type & 1) != 0 || (type != 0x10 && type != 0x06)) {
      return std::nullopt;
    }
    ts = (*v)->value;
  }
  return ts;
}

}  // namespace

void DatagramReceiver::drop(const char* why) {
  ++dropped_;
  MOQD_LOG(kDebug, "session %llu datagram dropped: %s",
           static_cast<unsigned long long>(session_.id()), why);
}

void DatagramReceiver::finish(Open& o) {
  if (o.group && o.track != nullptr && !o.group->is_done()) {
    o.track->finish_group(*o.group);
  }
  o.group = model::GroupRef();
}

void DatagramReceiver::on_datagram(std::span<const uint8_t> bytes) {
  IngressContext& s = session_;
  if (s.is_closed() || !s.is_ready()) {
    return;
  }
  auto r = wi::decode_datagram(s.draft(), bytes, s.limits());
  if (!r) {
    s.fail(r.error());
    return;
  }
  const wi::ObjectDatagram& d = (*r)->value;
  const auto payload = bytes.subspan((*r)->consumed);
  model::Track* t = s.upstream_track(d.track_alias);
  if (t == nullptr) {
    drop("no live subscription for this track alias");
    return;
  }
  Open& o = open_[d.track_alias];
  if (o.track != t) {
    // A new subscription under this alias: the old track's group is not ours to touch.
    o = Open{};
    o.track = t;
  }
  if (d.status) {
    const auto st = static_cast<model::ObjectStatus>(*d.status);
    if (st == model::ObjectStatus::kEndOfGroup || st == model::ObjectStatus::kEndOfTrack) {
      if (o.group && o.sequence == d.group && d.object == o.next_object) {
        finish(o);
        ++accepted_;
        return;
      }
      drop("end of a group not open here");
      return;
    }
    if (st != model::ObjectStatus::kNormal) {
      drop("object status moq-lite cannot carry");
      return;
    }
    // Status Normal: an empty object.
  }
  std::optional<uint64_t> timestamp;
  if (!d.extensions.empty()) {
    timestamp = timestamp_of(s.row(), d.extensions);
    if (!timestamp) {
      drop("object extension headers other than a timestamp");
      return;
    }
  }
  if (payload.size() > s.config().limits.max_frame_size) {
    drop("object over --max-frame-size");
    return;
  }
  if (d.object == 0) {
    if (o.group && o.sequence == d.group) {
      drop("object 0 of a group already begun");
      return;
    }
    finish(o);
    // The group's stream form (a stream fallback downstream) always has extension blocks: a later
    // datagram of the group may carry one although its first did not, and a header without them
    // could not carry it (an object without a block costs one byte there).
    model::Group* g = t->begin_group(d.group, 0, true);
    if (g == nullptr) {
      drop("group already cached or older than the cache");
      return;
    }
    o.group = model::GroupRef(g);
    o.sequence = d.group;
    o.next_object = 0;
  } else if (!o.group || o.sequence != d.group || d.object != o.next_object) {
    drop("object out of order or after a lost one");
    return;
  }
  if (!s.admit_ingress(payload.size())) {
    return;
  }
  if (TrafficCounters* tc = s.config().traffic) {
    tc->frames_in.add();
    tc->bytes_in.add(payload.size());
  }
  // The block is kept as it came (only a timestamp: checked above) so that IETF subscribers get
  // it again, and the object is marked unreliable so that they may get it as a datagram too.
  model::Track::IetfObject in;
  in.id = d.object;
  in.size = payload.size();
  in.timestamp = timestamp;
  in.unreliable = true;
  if (!d.extensions.empty()) {
    in.extensions = Bytes::copy(std::string_view(d.extensions));
    in.extensions_draft = s.row().number;
  }
  t->begin_ietf_object(*o.group, std::move(in));
  if (!payload.empty()) {
    t->append_chunk(*o.group, Bytes::copy(payload));
  }
  ++o.next_object;
  ++accepted_;
  if (d.end_of_group()) {
    finish(o);
  }
}

bool encode_object_datagram(wire::Version d, uint64_t alias, uint64_t group, const model::Object& o,
                            uint8_t priority, std::string_view properties, bool end_of_group,
                            std::vector<uint8_t>& out) {
  wi::ObjectDatagram h;
  h.type = wi::datagram_type(!properties.empty(), end_of_group, o.id == 0, false, false);
  h.track_alias = alias;
  h.group = group;
  h.object = o.id;
  h.publisher_priority = priority;
  h.extensions.assign(properties.data(), properties.size());
  if (!wi::encode_datagram(d, h, {}, out)) {
    return false;
  }
  for (const Bytes& c : o.chunks) {
    out.insert(out.end(), c.data(), c.data() + c.size());
  }
  return true;
}

void encode_end_of_group_datagram(wire::Version d, uint64_t alias, uint64_t group,
                                  uint64_t object, uint8_t priority, std::vector<uint8_t>& out) {
  wi::ObjectDatagram h;
  // The Object ID written out: d14 has no ZERO_OBJECT_ID status type.
  h.type = wi::datagram_type(false, false, false, false, true);
  h.track_alias = alias;
  h.group = group;
  h.object = object;
  h.publisher_priority = priority;
  h.status = static_cast<uint64_t>(model::ObjectStatus::kEndOfGroup);
  wi::encode_datagram(d, h, {}, out);
}

}  // namespace moqd::session::ietf_detail

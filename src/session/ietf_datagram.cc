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
    model::Group* g = t->begin_group(d.group);
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
  if (timestamp) {
    t->begin_timed_object(*o.group, payload.size(), *timestamp);
  } else {
    t->begin_object(*o.group, payload.size());
  }
  if (!payload.empty()) {
    t->append_chunk(*o.group, Bytes::copy(payload));
  }
  ++o.next_object;
  ++accepted_;
  if (d.end_of_group()) {
    finish(o);
  }
}

}  // namespace moqd::session::ietf_detail

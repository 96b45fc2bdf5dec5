#pragma once
// One UDP socket (one local port) shared by many QUIC client connections of one event loop: the
// load generator's viewers. The relay routes by connection ID, never by address, so nothing on
// its side changes; here each datagram is routed to its connection by its destination
// connection ID, which is always one this process chose (our SCIDs). Every CID a member issues
// is kCidLen bytes and starts with the member's kKeyLen-byte key, so a datagram's key sits at a
// fixed offset (short header: 1; long header: 6, after a DCID length of kCidLen). What this buys
// over a socket per connection: one epoll wakeup and one recvmmsg for a frame's packets to every
// member (UDP GRO coalesces them, as they share one 4-tuple), and every member's ACKs in one
// sendmmsg per loop turn (a message each: no GSO, which would defeat the relay's steering).
//
// The price, and why it is not the `moq` CLI's default: every CID of a member carries the same
// key, so an observer can link the connection's CIDs across a migration (RFC 9000 §9.5 asks
// for unlinkable CIDs), and a stateless reset (its DCID is random) reaches no member.
#include <ngtcp2/ngtcp2.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "base/counter.h"
#include "base/error.h"
#include "runtime/event_loop.h"
#include "runtime/udp.h"

namespace moqd::client {

class SharedQuicSocket {
 public:
  // Length of every CID a member issues, and of the key that starts it.
  static constexpr size_t kCidLen = 16;
  static constexpr size_t kKeyLen = 8;

  // A connection on the socket. on_datagram gets the datagrams whose DCID carries its key; it may
  // remove (and destroy) its own member from inside the call, never another one or the socket.
  class Member {
   public:
    virtual void on_datagram(const sockaddr* from, socklen_t from_len,
                             std::span<const uint8_t> datagram) = 0;

   protected:
    ~Member() = default;
  };

  // A client socket bound to an ephemeral port of `host`'s family (runtime::UdpSocket::
  // open_client with `o`: its GRO and buffer sizes; GSO always off, see the .cc).
  static Result<std::unique_ptr<SharedQuicSocket>> open(runtime::EventLoop& loop,
                                                        const std::string& host,
                                                        runtime::UdpSocket::Options o);
  // Every member must have been removed first.
  ~SharedQuicSocket() = default;
  SharedQuicSocket(const SharedQuicSocket&) = delete;
  SharedQuicSocket& operator=(const SharedQuicSocket&) = delete;

  // Registers `m`; returns its key (random, unique on this socket), to be put into every CID
  // the member issues with fill_cid(). `m` must stay alive until remove(key).
  uint64_t add(Member& m);
  // Unregisters the member with `key`: its datagrams are dropped (and counted) from now on.
  void remove(uint64_t key);
  // A new CID for the member with `key` (kCidLen bytes: the key, then random bytes) and its
  // random stateless reset token (NGTCP2_STATELESS_RESET_TOKENLEN bytes). A
  // transport::quic::CidGenerator once bound to a key.
  static void fill_cid(uint64_t key, ngtcp2_cid* cid, uint8_t* reset_token);
  // The key in `datagram`'s DCID, when its header holds a kCidLen-byte DCID. Sans-I/O.
  static std::optional<uint64_t> key_of(std::span<const uint8_t> datagram);

  runtime::UdpSocket& socket() { return *udp_; }
  const runtime::UdpSocket& socket() const { return *udp_; }
  size_t members() const { return members_.size(); }
  // Datagrams handed to a member, and datagrams dropped because no member has their key (an
  // unknown or malformed DCID, a member already removed, a stateless reset).
  uint64_t routed() const { return routed_.get(); }
  uint64_t unknown_dropped() const { return unknown_.get(); }

 private:
  explicit SharedQuicSocket(std::unique_ptr<runtime::UdpSocket> udp);
  void on_datagram(const sockaddr* from, socklen_t from_len, std::span<const uint8_t> datagram);

  std::unique_ptr<runtime::UdpSocket> udp_;
  std::unordered_map<uint64_t, Member*> members_;
  Counter routed_;
  Counter unknown_;
};

}  // namespace moqd::client

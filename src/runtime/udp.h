#pragma once
// UDP for QUIC: one non-blocking socket per worker and listen address (or one per client), batched
// both ways. Everything here belongs to the EventLoop it was given and runs on that loop's thread.
#include <linux/filter.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/counter.h"
#include "base/error.h"
#include "base/turn.h"
#include "runtime/event_loop.h"

namespace moqd::runtime {

// A non-blocking UDP socket on an EventLoop. Receives with recvmmsg (and UDP_GRO where the kernel
// supports it, splitting super-datagrams by the cmsg segment size), sends through a batch that
// flush() writes with sendmmsg, UDP_SEGMENT (GSO) for each run of equal-size datagrams to one peer,
// falling back to single datagrams when GSO is unavailable or fails (EIO etc). One thread.
//
// The batch is a fixed buffer of kBatchBytes that writers fill in place: prepare() hands out the
// room for the next datagram and send() of that same span commits it without a copy (any other
// span is copied in). The batch is flushed once at the end of the loop's turn (EventLoop::
// at_turn_flush), so one sendmmsg carries what every connection wrote in the turn, and at once
// whenever it is full. When the kernel's send buffer is full (EAGAIN) the unsent tail waits for
// EPOLLOUT; meanwhile prepare() returns no room and writers park with wait_for_room(), to be run
// again once the tail is out. send() of a copied datagram that finds no room drops it (counted;
// QUIC recovers lost packets). The handler may destroy the socket from inside a callback.
class UdpSocket final : private IoHandler {
 public:
  struct Options {
    bool reuse_port = false;  // SO_REUSEPORT (+ SO_REUSEADDR): one socket per worker on a port
    bool gso = true;          // send runs of equal-size datagrams as one UDP_SEGMENT super-datagram
    bool gro = true;          // ask the kernel for UDP_GRO super-datagrams on receive
    size_t buffer_bytes = 4 << 20;  // SO_RCVBUF / SO_SNDBUF (forced when privileged), bytes
  };
  using Handler = std::function<void(const sockaddr* from, socklen_t from_len,
                                     std::span<const uint8_t> datagram)>;
  // A snapshot of the socket's counters (readable from any thread; see base/counter.h).
  struct Stats {
    // messages_out: mmsghdr entries sent (a GSO run or a single datagram each), so
    // datagrams_out / messages_out is the GSO run length and messages_out / sendmsg_calls the
    // sendmmsg batch.
    uint64_t datagrams_in, datagrams_out, messages_out, bytes_out, sendmsg_calls, recv_calls,
        gso_batches, gro_batches;
    Stats& operator+=(const Stats& o) {
      datagrams_in += o.datagrams_in;
      datagrams_out += o.datagrams_out;
      messages_out += o.messages_out;
      bytes_out += o.bytes_out;
      sendmsg_calls += o.sendmsg_calls;
      recv_calls += o.recv_calls;
      gso_batches += o.gso_batches;
      gro_batches += o.gro_batches;
      return *this;
    }
  };

  // Bytes the send batch holds; a full batch is flushed at once (it is a few sendmmsg calls).
  static constexpr size_t kBatchBytes = 1 << 20;
  // The largest datagram send() accepts and receive buffers hold (a GRO super-datagram included).
  static constexpr size_t kMaxDatagram = 65535;

  static Result<std::unique_ptr<UdpSocket>> bind(EventLoop& loop, const std::string& host,
                                                 uint16_t port, Options o);
  // A client socket bound to an ephemeral port of the right family for `host`.
  static Result<std::unique_ptr<UdpSocket>> open_client(EventLoop& loop, const std::string& host,
                                                        Options o);
  ~UdpSocket() override;
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  // The first non-null handler starts reading; datagrams are dropped while the handler is null.
  void set_handler(Handler h);
  // Room for one datagram of `len` bytes at the end of the batch, to be written and then passed to
  // send(); flushes a full batch first. Empty when the kernel has not taken the batch's tail yet
  // (then wait_for_room()), or when `len` is over kMaxDatagram.
  std::span<uint8_t> prepare(size_t len);
  // Queues `datagram` for `to`: in place when it starts where the last prepare() pointed, else
  // copied. Empty or oversized datagrams are ignored; a copy with no room is dropped (counted).
  void send(const sockaddr* to, socklen_t to_len, std::span<const uint8_t> datagram);
  // `writer` found no room: it runs (TurnWork, once) at the end of the turn in which the kernel
  // takes the batch's tail.
  void wait_for_room(TurnWork& writer) { waiting_.push(writer); }
  // Writes the batch now. Also done at the end of each loop turn in which something was queued.
  void flush();
  // SO_ATTACH_REUSEPORT_CBPF: `program` picks, for each datagram to the port, the socket of the
  // reuseport group (by the order the sockets were bound) that receives it. It applies to the
  // whole group, whichever member it is attached to. detach_reuseport_program() undoes it.
  Status attach_reuseport_program(std::span<const sock_filter> program);
  void detach_reuseport_program();
  // Sends `datagram` to this socket's address from a throwaway socket (loopback when bound to a
  // wildcard address): for checks at start, before the loop runs.
  Status send_to_self(std::span<const uint8_t> datagram) const;
  // Reads every datagram waiting in the kernel now, without the handler (before the loop runs);
  // the number read.
  size_t drain_now(const std::function<void(std::span<const uint8_t>)>& fn);
  const sockaddr_storage& local_address() const { return local_; }
  socklen_t local_address_len() const { return local_len_; }
  uint16_t port() const;
  int fd() const { return fd_; }
  Stats stats() const;
  // Datagrams dropped by send() because the batch was full, or by the kernel refusing them.
  uint64_t datagrams_dropped() const { return dropped_.get(); }
  // The kernel's receive and send buffer sizes as set (getsockopt halved: the kernel doubles what
  // it is asked for), and whether it gave less than Options::buffer_bytes (then a warning was
  // logged: raise net.core.rmem_max / wmem_max, or run privileged).
  size_t receive_buffer_bytes() const { return rcvbuf_; }
  size_t send_buffer_bytes() const { return sndbuf_; }
  bool buffers_clamped() const { return rcvbuf_ < options_.buffer_bytes || sndbuf_ < options_.buffer_bytes; }

 private:
  struct Pending {
    size_t offset = 0;  // into buf_
    uint16_t len = 0;
    socklen_t to_len = 0;
    sockaddr_storage to{};
  };
  struct Message;  // one mmsghdr's worth: a GSO run or a single datagram
  // Flushes the batch at the end of the turn.
  class FlushWork final : public TurnWork {
   public:
    explicit FlushWork(UdpSocket& s) : socket_(s) {}
    void run_turn_work() override { socket_.flush(); }

   private:
    UdpSocket& socket_;
  };

  UdpSocket(EventLoop& loop, int fd, Options o);
  static Result<std::unique_ptr<UdpSocket>> open(EventLoop& loop, const sockaddr* addr,
                                                 socklen_t len, Options o);
  void on_io(uint32_t events) override;
  void on_readable();
  // Returns false when the handler destroyed the socket.
  bool deliver(const sockaddr* from, socklen_t from_len, const uint8_t* data, size_t len,
               size_t segment);
  size_t run_length(size_t first) const;
  size_t fill_messages(size_t first, std::vector<Message>& out);
  // Returns the number of entries written, or 0 when the socket would block.
  size_t send_messages(size_t first);
  void compact();
  void on_drained();
  bool has_room(size_t len) const { return used_ + len <= kBatchBytes; }
  void watch_writable(bool on);
  void update_events();

  EventLoop& loop_;
  int fd_;
  Options options_;
  sockaddr_storage local_{};
  socklen_t local_len_ = 0;
  Handler handler_;
  uint32_t events_ = 0;  // registered with the loop
  bool watching_out_ = false;
  struct Counters {
    Counter datagrams_in, datagrams_out, messages_out, bytes_out, sendmsg_calls, recv_calls,
        gso_batches, gro_batches;
  };
  Counters stats_;
  Counter dropped_;
  size_t rcvbuf_ = 0;
  size_t sndbuf_ = 0;
  std::unique_ptr<uint8_t[]> batch_;  // queued datagrams back to back; kBatchBytes, allocated on first use
  size_t used_ = 0;                   // bytes of batch_ queued
  std::vector<Pending> pending_;      // in send order
  size_t sent_ = 0;                   // entries of pending_ already written
  FlushWork flush_work_{*this};
  TurnQueue waiting_;                 // writers that found no room
  std::vector<uint8_t> recv_buf_;
  bool* alive_ = nullptr;  // set while inside on_io; cleared by the destructor
};

}  // namespace moqd::runtime

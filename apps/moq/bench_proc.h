#pragma once
// What `moq bench` needs from the operating system: child processes pinned to CPUs and talked
// to over pipes (one command per line in, one report per line out), and readings from /proc of
// a process's CPU time, resident memory and its UDP sockets' kernel drop counters.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moqd::bench {

// "0-3,8" -> {0,1,2,3,8}; nullopt when malformed.
std::optional<std::vector<int>> parse_cpu_list(const std::string& list);
std::string format_cpu_list(const std::vector<int>& cpus);
// The CPUs this process may run on.
std::vector<int> allowed_cpus();
// Pins the calling thread (and what it execs) to `cpus`; false on failure.
bool pin_to(const std::vector<int>& cpus);
// Raises RLIMIT_NOFILE's soft limit to its hard limit (thousands of viewers need the fds).
void raise_fd_limit();
// The path of the running executable's folder ("/.../build/bin").
std::string self_dir();

// A child process with its stdin and stdout on pipes. Lines it prints are read with
// read_lines(); commands go to it with send(). Killed (SIGKILL) and reaped when destroyed, unless
// it already exited.
class Child {
 public:
  // Starts argv[0] with `argv`, pinned to `cpus` (none: inherits). stderr is inherited.
  static std::optional<Child> spawn(const std::vector<std::string>& argv, const std::vector<int>& cpus);
  Child(Child&& o) noexcept;
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  int out_fd() const { return out_; }
  // Writes `line` and a newline to the child's stdin.
  bool send(const std::string& line);
  // Reads what is available (non-blocking) and returns the complete lines; sets eof() at the
  // end of its stdout.
  std::vector<std::string> read_lines();
  bool eof() const { return eof_; }
  // Waits up to `timeout_ms` for the child to exit; its exit status, or -1 if it did not.
  int wait(int timeout_ms);

 private:
  Child() = default;
  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  bool eof_ = false;
  bool reaped_ = false;
  std::string buf_;
};

// Waits until any of `children` has output or `timeout_ms` passes.
void wait_for_output(const std::vector<Child*>& children, int timeout_ms);

// CPU time of process `pid` so far, in seconds: its live threads' run time to the nanosecond
// (schedstat), or /proc/PID/stat's user plus system ticks where more (threads that exited); -1 if gone.
double process_cpu_seconds(pid_t pid);
// Resident set size of `pid` (VmRSS), in bytes; 0 if gone.
uint64_t process_rss_bytes(pid_t pid);
// Open file descriptors of `pid` (entries of /proc/PID/fd); 0 if gone.
size_t process_fd_count(pid_t pid);
// Datagrams the kernel dropped on the UDP sockets that process `pid` holds (the drops column
// of /proc/net/udp and udp6 for the socket inodes among its fds): full receive buffers.
uint64_t udp_socket_drops(pid_t pid);

// key=value fields of one report line ("result viewers=10 frames=300"), in order.
std::vector<std::pair<std::string, std::string>> parse_fields(const std::string& line);
// The value of `key` in `fields` as a number, or `fallback`.
double field_number(const std::vector<std::pair<std::string, std::string>>& fields,
                    const std::string& key, double fallback = 0);
std::string field_text(const std::vector<std::pair<std::string, std::string>>& fields,
                       const std::string& key);

}  // namespace moqd::bench

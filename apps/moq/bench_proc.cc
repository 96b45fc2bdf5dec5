#include "bench_proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace moqd::bench {

std::optional<std::vector<int>> parse_cpu_list(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty()) {
      return std::nullopt;
    }
    char* end = nullptr;
    long lo = std::strtol(part.c_str(), &end, 10);
    long hi = lo;
    if (*end == '-') {
      hi = std::strtol(end + 1, &end, 10);
    }
    if (*end != '\0' || lo < 0 || hi < lo || hi > 4095) {
      return std::nullopt;
    }
    for (long c = lo; c <= hi; ++c) {
      out.push_back(static_cast<int>(c));
    }
  }
  if (out.empty()) {
    return std::nullopt;
  }
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) {
      ++j;
    }
    s += (s.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (j > i) {
      s += "-" + std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return s;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) {
        out.push_back(c);
      }
    }
  }
  return out;
}

bool pin_to(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    CPU_SET(c, &set);
  }
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

void raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

std::string self_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) {
    return ".";
  }
  std::string p(buf, static_cast<size_t>(n));
  auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::optional<Child> Child::spawn(const std::vector<std::string>& argv, const std::vector<int>& cpus) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) {
    return std::nullopt;
  }
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return std::nullopt;
  }
  std::vector<char*> args;
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    return std::nullopt;
  }
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    if (!cpus.empty()) {
      pin_to(cpus);
    }
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  Child c;
  c.pid_ = pid;
  c.in_ = in[1];
  c.out_ = out[0];
  return c;
}

Child::Child(Child&& o) noexcept { *this = std::move(o); }

Child& Child::operator=(Child&& o) noexcept {
  std::swap(pid_, o.pid_);
  std::swap(in_, o.in_);
  std::swap(out_, o.out_);
  std::swap(eof_, o.eof_);
  std::swap(reaped_, o.reaped_);
  std::swap(buf_, o.buf_);
  return *this;
}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (in_ >= 0) {
    ::close(in_);
  }
  if (out_ >= 0) {
    ::close(out_);
  }
}

bool Child::send(const std::string& line) {
  std::string l = line + "\n";
  return in_ >= 0 && ::write(in_, l.data(), l.size()) == static_cast<ssize_t>(l.size());
}

std::vector<std::string> Child::read_lines() {
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(out_, chunk, sizeof chunk);
    if (n > 0) {
      buf_.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      eof_ = true;
    }
    break;
  }
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = buf_.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(buf_.substr(start, nl - start));
  }
  buf_.erase(0, start);
  return lines;
}

int Child::wait(int timeout_ms) {
  if (reaped_) {
    return 0;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void wait_for_output(const std::vector<Child*>& children, int timeout_ms) {
  std::vector<pollfd> fds;
  for (Child* c : children) {
    if (!c->eof()) {
      fds.push_back({c->out_fd(), POLLIN, 0});
    }
  }
  ::poll(fds.data(), fds.size(), timeout_ms);
}

namespace {

// Run time of `pid`'s live threads (the first field of /proc/PID/task/TID/schedstat, in ns).
// /proc/PID/stat counts in clock ticks (10 ms), so a relay that served a one-second run on a few
// milliseconds of CPU read as 0 there; threads that already exited are only in /proc/PID/stat.
double threads_run_seconds(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return 0;
  }
  unsigned long long ns = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') {
      continue;
    }
    std::ifstream f(dir + "/" + e->d_name + "/schedstat");
    unsigned long long run = 0;
    if (f >> run) {
      ns += run;
    }
  }
  ::closedir(d);
  return static_cast<double>(ns) / 1e9;
}

}  // namespace

double process_cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto paren = all.rfind(')');
  if (paren == std::string::npos) {
    return -1;
  }
  std::istringstream in(all.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {  // fields 3.. after "pid (comm)"
    if (i == 14) {
      utime = std::strtoull(field.c_str(), nullptr, 10);
    } else if (i == 15) {
      stime = std::strtoull(field.c_str(), nullptr, 10);
    }
  }
  double ticks = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return std::max(ticks, threads_run_seconds(pid));
}

uint64_t process_rss_bytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
    }
  }
  return 0;
}

size_t process_fd_count(pid_t pid) {
  size_t n = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      n += e->d_name[0] != '.' ? 1 : 0;
    }
    ::closedir(d);
  }
  return n;
}

uint64_t udp_socket_drops(pid_t pid) {
  std::set<unsigned long> inodes;
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      char target[256];
      ssize_t n = ::readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
      if (n > 0) {
        target[n] = '\0';
        unsigned long inode = 0;
        if (std::sscanf(target, "socket:[%lu]", &inode) == 1) {
          inodes.insert(inode);
        }
      }
    }
    ::closedir(d);
  }
  uint64_t drops = 0;
  for (const char* table : {"/net/udp", "/net/udp6"}) {
    std::ifstream f("/proc/" + std::to_string(pid) + table);
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
      std::istringstream in(line);
      std::string col[13];
      for (auto& c : col) {
        in >> c;
      }
      if (inodes.count(std::strtoul(col[9].c_str(), nullptr, 10)) != 0) {
        drops += std::strtoull(col[12].c_str(), nullptr, 10);
      }
    }
  }
  return drops;
}

std::vector<std::pair<std::string, std::string>> parse_fields(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq != std::string::npos) {
      out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
    }
  }
  return out;
}

double field_number(const std::vector<std::pair<std::string, std::string>>& fields,
                    const std::string& key, double fallback) {
  for (const auto& [k, v] : fields) {
    if (k == key) {
      return std::strtod(v.c_str(), nullptr);
    }
  }
  return fallback;
}

std::string field_text(const std::vector<std::pair<std::string, std::string>>& fields,
                       const std::string& key) {
  for (const auto& [k, v] : fields) {
    if (k == key) {
      return v;
    }
  }
  return "";
}

}  // namespace moqd::bench

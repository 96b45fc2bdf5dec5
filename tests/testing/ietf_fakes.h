#pragma once
// The base of the fake contexts (session/ietf_context.h) that the IETF handler tests
// (ietf_handlers_test, ietf_handlers2_test) put a handler on: it records what the handler asked of
// the session (its failure, the control messages sent, the handlers retired) and answers the
// session's settings from fields the test sets. Each test derives the handler's own context from
// it. Single-threaded; test only.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/codec.h"
#include "base/error.h"
#include "session/config.h"
#include "session/ietf_context.h"
#include "wire/ietf.h"
#include "wire/version.h"

namespace moqd::testing {

class FakeHandlerContext : public virtual session::ietf_detail::HandlerContext {
 public:
  explicit FakeHandlerContext(wire::Version v) : version_(v), row_(wire::ietf::draft(v)) {}

  uint64_t id() const override { return 1; }
  wire::Version draft() const override { return version_; }
  const wire::ietf::Draft& row() const override { return *row_; }
  const wire::ietf::Limits& limits() const override { return limits_; }
  const session::SessionConfig& config() const override { return config_; }
  const std::string& query() const override { return config_.query; }
  Timers& timers() override { return clock_; }
  bool is_ready() const override { return ready; }
  bool is_closed() const override { return failed_code.has_value() || failed_error.has_value(); }
  void fail(Error e) override { failed_error = e; }
  void fail(wire::ietf::TerminationCode code, const char* detail) override {
    failed_code = code;
    failed_detail = detail;
  }
  void send_control(const wire::ietf::ControlMessage& m) override { sent.push_back(m); }
  void retire(session::ietf_detail::Handler* h) override { retired.push_back(h); }

  // The i-th control message sent, as the session writes it ("" when there is none).
  std::string sent_hex(size_t i) const {
    if (i >= sent.size()) {
      return "";
    }
    std::vector<uint8_t> out;
    EXPECT_TRUE(wire::ietf::encode(version_, sent[i], out));
    return to_hex(std::span<const uint8_t>(out));
  }

  bool ready = true;
  std::optional<Error> failed_error;
  std::optional<wire::ietf::TerminationCode> failed_code;
  std::string failed_detail;
  std::vector<wire::ietf::ControlMessage> sent;
  std::vector<session::ietf_detail::Handler*> retired;
  ManualClock clock_;
  session::SessionConfig config_;

 private:
  wire::Version version_;
  const wire::ietf::Draft* row_;
  wire::ietf::Limits limits_;
};

}  // namespace moqd::testing

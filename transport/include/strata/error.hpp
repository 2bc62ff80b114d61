// strata error model, shared by every layer.
//
// Hot paths return a Status (a code plus an optional message, cheap to copy
// when OK). The public API turns a failed Status into a strata::Error, an
// exception carrying a std::error_code in the strata category. Every message
// names the argument, the rank and the operation involved.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace strata {

/// @brief Error codes of the strata category.
enum class Errc : int {
  ok = 0,
  invalid_argument = 1,  ///< bad argument; the message names it and the rank
  not_registered,        ///< buffer not registered / outside its registration
  out_of_range,          ///< offset or length outside a remote registration
  unknown_peer,          ///< rank outside [0, size)
  peer_dead,             ///< a peer exited, was killed or stopped answering
  timeout,               ///< an operation exceeded STRATA_TIMEOUT
  transport_error,       ///< a provider reported an error (message carries it)
  bootstrap_error,       ///< rendezvous / PMIx failure
  shutdown,              ///< used after the engine shut down
  cancelled,             ///< cancelled by the user
  unsupported,           ///< feature, datatype or op not supported
  internal,              ///< invariant violated inside strata (a bug)
  revoked,               ///< the communicator was revoked (Communicator::revoke; shrink it to go on)
};

/// @brief The std::error_category of strata errors (name "strata").
const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(Errc e) noexcept { return {static_cast<int>(e), error_category()}; }

/// @brief Result of a hot-path operation: a code and, on failure, a message.
class Status {
 public:
  Status() noexcept = default;
  Status(Errc code, std::string message)
      : code_(code), message_(code == Errc::ok ? nullptr : std::make_shared<std::string>(std::move(message))) {}

  static Status ok() noexcept { return {}; }
  [[nodiscard]] bool is_ok() const noexcept { return code_ == Errc::ok; }
  explicit operator bool() const noexcept { return is_ok(); }
  [[nodiscard]] Errc code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const noexcept;

 private:
  Errc code_ = Errc::ok;
  std::shared_ptr<const std::string> message_;
};

/// @brief The exception thrown by the public API (Future::get, blocking calls).
class Error : public std::system_error {
 public:
  Error(Errc code, const std::string& message) : std::system_error(make_error_code(code), message) {}
  explicit Error(const Status& s) : Error(s.code(), s.message()) {}
  [[nodiscard]] Errc errc() const noexcept { return static_cast<Errc>(code().value()); }
};

/// Throws strata::Error when @p s is not OK.
inline void throw_if_error(const Status& s) {
  if (!s.is_ok()) throw Error(s);
}

}  // namespace strata

namespace std {
template <>
struct is_error_code_enum<strata::Errc> : true_type {};
}  // namespace std

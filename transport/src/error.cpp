#include "strata/error.hpp"

namespace strata {
namespace {
class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "strata"; }
  std::string message(int c) const override {
    switch (static_cast<Errc>(c)) {
      case Errc::ok:
        return "ok";
      case Errc::invalid_argument:
        return "invalid argument";
      case Errc::not_registered:
        return "memory not registered";
      case Errc::out_of_range:
        return "out of range of the registration";
      case Errc::unknown_peer:
        return "unknown peer";
      case Errc::peer_dead:
        return "peer dead";
      case Errc::timeout:
        return "timed out";
      case Errc::transport_error:
        return "transport error";
      case Errc::bootstrap_error:
        return "bootstrap error";
      case Errc::shutdown:
        return "engine shut down";
      case Errc::cancelled:
        return "cancelled";
      case Errc::unsupported:
        return "unsupported";
      case Errc::internal:
        return "internal error";
      case Errc::revoked:
        return "communicator revoked";
    }
    return "unknown strata error";
  }
};
}  // namespace

const std::error_category& error_category() noexcept {
  static const Category c;
  return c;
}

const std::string& Status::message() const noexcept {
  static const std::string empty;
  return message_ ? *message_ : empty;
}
}  // namespace strata

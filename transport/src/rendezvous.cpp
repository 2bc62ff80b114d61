// Rendezvous wire protocol helpers (see strata/detail/rendezvous.hpp).
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "strata/detail/rendezvous.hpp"

namespace strata::detail::rdv {

namespace {
void put32(std::byte* p, std::uint32_t v) noexcept { std::memcpy(p, &v, sizeof v); }
void put64(std::byte* p, std::uint64_t v) noexcept { std::memcpy(p, &v, sizeof v); }
std::uint32_t get32(const std::byte* p) noexcept {
  std::uint32_t v = 0;
  std::memcpy(&v, p, sizeof v);
  return v;
}
std::uint64_t get64(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

std::array<std::byte, kHeaderSize> encode_header(const Header& h) noexcept {
  std::array<std::byte, kHeaderSize> out{};
  put32(out.data(), kMagic);
  put32(out.data() + 4, static_cast<std::uint32_t>(h.type));
  put32(out.data() + 8, h.arg);
  put32(out.data() + 12, 0);
  put64(out.data() + 16, h.len);
  return out;
}

bool decode_header(const std::byte* data, Header& out) noexcept {
  if (get32(data) != kMagic) return false;
  const std::uint32_t t = get32(data + 4);
  if (t < static_cast<std::uint32_t>(Type::hello) || t > static_cast<std::uint32_t>(Type::rank_dead)) return false;
  const std::uint64_t len = get64(data + 16);
  if (len > kMaxPayload) return false;
  out.type = static_cast<Type>(t);
  out.arg = get32(data + 8);
  out.len = len;
  return true;
}

std::string header_problem(const std::byte* data) {
  char buf[96];
  if (get32(data) != kMagic) {
    std::snprintf(buf, sizeof buf, "bad magic 0x%08x (expected 0x%08x, \"STRD\")", get32(data), kMagic);
    return buf;
  }
  const std::uint32_t t = get32(data + 4);
  if (t < static_cast<std::uint32_t>(Type::hello) || t > static_cast<std::uint32_t>(Type::rank_dead))
    return "unknown message type " + std::to_string(t);
  const std::uint64_t len = get64(data + 16);
  if (len > kMaxPayload)
    return "payload of " + std::to_string(len) + " bytes is over the limit of " + std::to_string(kMaxPayload);
  return {};
}

std::string type_name(Type t) {
  switch (t) {
    case Type::hello:
      return "hello";
    case Type::welcome:
      return "welcome";
    case Type::allgather:
      return "allgather";
    case Type::barrier:
      return "barrier";
    case Type::result:
      return "result";
    case Type::failed:
      return "failed";
    case Type::rank_dead:
      return "rank_dead";
  }
  return "type " + std::to_string(static_cast<std::uint32_t>(t));
}

std::vector<std::byte> frame(Type type, std::uint32_t arg, const void* data, std::size_t len) {
  std::vector<std::byte> out(kHeaderSize + len);
  const auto h = encode_header(Header{type, arg, len});
  std::memcpy(out.data(), h.data(), kHeaderSize);
  if (len > 0) std::memcpy(out.data() + kHeaderSize, data, len);
  return out;
}

void Parser::feed(const std::byte* data, std::size_t len) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (std::size_t{1} << 20) && pos_ * 2 > buf_.size()) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
    pos_ = 0;
  }
  buf_.insert(buf_.end(), data, data + len);
}

int Parser::peek(Header& out) const noexcept {
  if (buffered() < kHeaderSize) return 0;
  return decode_header(buf_.data() + pos_, out) ? 1 : -1;
}

std::string Parser::error() const {
  if (buffered() < kHeaderSize) return "incomplete header";
  return header_problem(buf_.data() + pos_);
}

int Parser::next(Message& out) {
  if (buffered() < kHeaderSize) return 0;
  Header h;
  if (!decode_header(buf_.data() + pos_, h)) return -1;
  if (buffered() - kHeaderSize < h.len) return 0;
  const std::byte* body = buf_.data() + pos_ + kHeaderSize;
  out.header = h;
  out.body.assign(body, body + h.len);
  pos_ += kHeaderSize + h.len;
  return 1;
}

std::vector<std::byte> pack_blobs(const std::vector<std::vector<std::byte>>& blobs) {
  std::size_t total = 4;
  for (const auto& b : blobs) total += 8 + b.size();
  std::vector<std::byte> out(total);
  put32(out.data(), static_cast<std::uint32_t>(blobs.size()));
  std::size_t pos = 4;
  for (const auto& b : blobs) {
    put64(out.data() + pos, b.size());
    pos += 8;
    if (!b.empty()) std::memcpy(out.data() + pos, b.data(), b.size());
    pos += b.size();
  }
  return out;
}

bool unpack_blobs(const std::byte* data, std::size_t len, std::size_t expected,
                  std::vector<std::vector<std::byte>>& out) {
  if (len < 4 || get32(data) != expected) return false;
  out.assign(expected, {});
  std::size_t pos = 4;
  for (std::size_t i = 0; i < expected; ++i) {
    if (len - pos < 8) return false;
    const std::uint64_t n = get64(data + pos);
    pos += 8;
    if (n > len - pos) return false;
    out[i].assign(data + pos, data + pos + n);
    pos += n;
  }
  return pos == len;
}

bool secrets_equal(const Secret& a, const Secret& b) noexcept {
  unsigned diff = 0;
  for (std::size_t i = 0; i < kSecretSize; ++i) diff |= static_cast<unsigned>(a[i] ^ b[i]);
  // Prevent the compiler from short-circuiting the loop.
  volatile unsigned sink = diff;
  return sink == 0;
}

std::string secret_to_hex(const Secret& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * kSecretSize);
  for (auto b : s) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xf]);
  }
  return out;
}

bool secret_from_hex(const std::string& hex, Secret& out) noexcept {
  if (hex.size() != 2 * kSecretSize) return false;
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < kSecretSize; ++i) {
    const int hi = val(hex[2 * i]);
    const int lo = val(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return true;
}

void random_bytes(void* out, std::size_t len) {
  auto* p = static_cast<unsigned char*>(out);
  std::size_t got = 0;
  while (got < len) {
    const ssize_t n = getrandom(p + got, len - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(Errc::bootstrap_error, std::string("getrandom failed: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
}

std::string random_hex(std::size_t nbytes) {
  static const char* digits = "0123456789abcdef";
  std::vector<unsigned char> raw(nbytes);
  random_bytes(raw.data(), raw.size());
  std::string out;
  out.reserve(2 * nbytes);
  for (auto b : raw) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xf]);
  }
  return out;
}

bool write_all(int fd, const void* data, std::size_t len, std::chrono::steady_clock::time_point deadline) {
  const auto* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == ENOTSOCK) {
      const ssize_t w = ::write(fd, p, len);
      if (w > 0) {
        p += w;
        len -= static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno != EAGAIN && errno != EINTR) return false;
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return false;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      errno = ETIMEDOUT;
      return false;
    }
    pollfd pfd{fd, POLLOUT, 0};
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    if (::poll(&pfd, 1, static_cast<int>(ms > 60000 ? 60000 : ms)) < 0 && errno != EINTR) return false;
  }
  return true;
}

Placement block_placement(int rank, int n, int hosts) noexcept {
  const int base = n / hosts;
  const int extra = n % hosts;
  // Hosts [0, extra) hold base + 1 ranks, the others base.
  const int big = extra * (base + 1);
  Placement p;
  if (rank < big) {
    p.host = rank / (base + 1);
    p.local_rank = rank % (base + 1);
    p.local_size = base + 1;
  } else {
    p.host = extra + (rank - big) / base;
    p.local_rank = (rank - big) % base;
    p.local_size = base;
  }
  return p;
}

}  // namespace strata::detail::rdv

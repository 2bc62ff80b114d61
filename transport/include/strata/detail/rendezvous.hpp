// Wire protocol of the strata-run rendezvous (internal, shared by the launcher's
// server and the rank-side client; see docs/launcher.md).
//
// Transport: a Unix stream socket in a private 0700 directory created by the
// launcher (STRATA_RDV). Every message is a 24-byte header followed by `len`
// payload bytes. Integers are in host byte order (both ends run on one machine).
//
//   client -> server   hello      arg = rank, payload = 32-byte job secret
//   server -> client   welcome    (authentication succeeded)
//   client -> server   allgather  arg = round, payload = this rank's blob
//   client -> server   barrier    arg = round
//   server -> client   result     arg = round, payload = packed blobs (see pack_blobs)
//   server -> client   failed     arg = round, payload = message (collective cannot complete)
//   server -> client   rank_dead  arg = dead rank, payload = description (pushed any time)
//
// A client that sends anything but a valid hello first, a wrong secret, a rank
// outside [0, size) or a rank already taken is disconnected without a reply.
#pragma once

#include <poll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/error.hpp"

namespace strata::detail::rdv {

/// @brief First four bytes of every header ("STRD").
inline constexpr std::uint32_t kMagic = 0x44525453u;
/// @brief Size of an encoded header in bytes.
inline constexpr std::size_t kHeaderSize = 24;
/// @brief Largest payload either side accepts (a larger one is a protocol error).
inline constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 30;
/// @brief Bytes in the job secret.
inline constexpr std::size_t kSecretSize = 32;

/// @brief The per-job secret.
using Secret = std::array<std::uint8_t, kSecretSize>;

/// Tag in the names of the job's shared-memory objects ("/strata-<tag>-<rank>"):
/// FNV-1a over the job id and the secret, so other jobs cannot guess the names.
/// Shared by the shm backend (creates them) and strata-run (removes leftovers).
inline std::string shm_job_tag(const std::string& job_id, const std::uint8_t* secret, std::size_t secret_len) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](std::uint8_t b) {
    h ^= b;
    h *= 1099511628211ULL;
  };
  for (char ch : job_id) mix(static_cast<std::uint8_t>(ch));
  for (std::size_t i = 0; i < secret_len; ++i) mix(secret[i]);
  mix(0x5a);
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<std::size_t>(i)] = digits[h & 15];
  return out;
}

/// @brief Message types of the protocol.
enum class Type : std::uint32_t {
  hello = 1,
  welcome = 2,
  allgather = 3,
  barrier = 4,
  result = 5,
  failed = 6,
  rank_dead = 7,
};

/// @brief A decoded message header.
struct Header {
  Type type = Type::hello;  ///< message type
  std::uint32_t arg = 0;    ///< rank or round, depending on the type
  std::uint64_t len = 0;    ///< payload length in bytes
};

/// @brief Encodes @p h into exactly kHeaderSize bytes.
std::array<std::byte, kHeaderSize> encode_header(const Header& h) noexcept;

/// @brief Decodes a header. Returns false if the magic or the type is invalid
/// or the payload is larger than kMaxPayload.
/// @param data at least kHeaderSize bytes
/// @param out receives the header
bool decode_header(const std::byte* data, Header& out) noexcept;

/// @brief Why decode_header() refuses @p data ("bad magic 0x...", "unknown
/// message type 9", "payload of N bytes is over the 1 GiB limit"), or "" if it
/// accepts it.
/// @param data at least kHeaderSize bytes
std::string header_problem(const std::byte* data);

/// @brief Printable name of a message type ("hello", ...; "type N" if unknown).
/// @param t the type
std::string type_name(Type t);

/// @brief A complete message: header plus payload.
struct Message {
  Header header;                ///< decoded header
  std::vector<std::byte> body;  ///< payload (header.len bytes)
};

/// @brief Serializes a whole message (header then payload).
/// @param type message type
/// @param arg rank or round
/// @param data payload, may be null when @p len is 0
/// @param len payload length
std::vector<std::byte> frame(Type type, std::uint32_t arg, const void* data, std::size_t len);

/// @brief Incremental decoder: feed bytes as they arrive, take whole messages.
class Parser {
 public:
  /// @brief Appends @p len received bytes.
  void feed(const std::byte* data, std::size_t len);
  /// @brief Extracts the next complete message into @p out.
  /// @return 1 if a message was extracted, 0 if more bytes are needed, -1 on a
  /// malformed header (the stream is unusable afterwards).
  int next(Message& out);
  /// @brief Bytes received but not yet consumed.
  [[nodiscard]] std::size_t buffered() const noexcept { return buf_.size() - pos_; }
  /// @brief Decodes the header of the next message once its kHeaderSize bytes
  /// are buffered, before its payload arrived (so a receiver can refuse a
  /// length it will not accept without buffering the payload).
  /// @return 1 with @p out set, 0 if fewer bytes are buffered, -1 if malformed
  int peek(Header& out) const noexcept;
  /// @brief After next() or peek() returned -1: what was wrong (header_problem()).
  [[nodiscard]] std::string error() const;

 private:
  std::vector<std::byte> buf_;
  std::size_t pos_ = 0;
};

/// @brief Packs blobs as: u32 count, then per blob u64 length and the bytes.
std::vector<std::byte> pack_blobs(const std::vector<std::vector<std::byte>>& blobs);

/// @brief Inverse of pack_blobs. Returns false when @p data is malformed or
/// does not hold exactly @p expected blobs.
/// @param data packed bytes
/// @param len number of packed bytes
/// @param expected number of blobs expected (the job size)
/// @param out receives the blobs
bool unpack_blobs(const std::byte* data, std::size_t len, std::size_t expected,
                  std::vector<std::vector<std::byte>>& out);

/// @brief Compares two secrets in time independent of where they differ.
bool secrets_equal(const Secret& a, const Secret& b) noexcept;

/// @brief Lower-case hex encoding of a secret (64 characters).
std::string secret_to_hex(const Secret& s);

/// @brief Parses 64 hex characters into @p out; false if malformed.
/// @param hex the text, exactly 64 hex digits
/// @param out receives the secret
bool secret_from_hex(const std::string& hex, Secret& out) noexcept;

/// @brief Fills @p len bytes with kernel randomness (getrandom). Throws
/// strata::Error(bootstrap_error) on failure.
/// @param out destination
/// @param len number of bytes
void random_bytes(void* out, std::size_t len);

/// @brief @p nbytes random bytes as lower-case hex (2 * nbytes characters).
/// @param nbytes number of random bytes
std::string random_hex(std::size_t nbytes);

/// @brief Writes all of @p len bytes to a (blocking or non-blocking) socket
/// or pipe, waiting with poll() at most until @p deadline. Returns false on
/// error, EOF or timeout (errno set; ETIMEDOUT for a timeout).
/// @param fd destination descriptor
/// @param data bytes to write
/// @param len number of bytes
/// @param deadline give up after this instant
bool write_all(int fd, const void* data, std::size_t len, std::chrono::steady_clock::time_point deadline);

/// @brief Environment variable names set by strata-run for every rank.
namespace env {
inline constexpr const char* kRank = "STRATA_RANK";
inline constexpr const char* kSize = "STRATA_SIZE";
inline constexpr const char* kHost = "STRATA_HOST";
inline constexpr const char* kNHosts = "STRATA_NHOSTS";
inline constexpr const char* kLocalRank = "STRATA_LOCAL_RANK";
inline constexpr const char* kLocalSize = "STRATA_LOCAL_SIZE";
inline constexpr const char* kJobId = "STRATA_JOB_ID";
inline constexpr const char* kSecret = "STRATA_JOB_SECRET";
inline constexpr const char* kRdv = "STRATA_RDV";
inline constexpr const char* kJobDir = "STRATA_JOB_DIR";
inline constexpr const char* kTopology = "STRATA_TOPOLOGY";
inline constexpr const char* kBind = "STRATA_BIND";
inline constexpr const char* kRequireLauncher = "STRATA_REQUIRE_LAUNCHER";
inline constexpr const char* kBootstrapTimeout = "STRATA_BOOTSTRAP_TIMEOUT";
}  // namespace env

/// @brief Where block placement puts one rank: ranks are split into @p hosts
/// contiguous blocks, the first n % hosts blocks one rank larger.
struct Placement {
  int host = 0;        ///< host of the rank
  int local_rank = 0;  ///< index among the ranks of its host
  int local_size = 1;  ///< ranks on that host
};

/// @brief Placement of @p rank among @p n ranks on @p hosts hosts (block).
/// @param rank the rank, in [0, n)
/// @param n number of ranks, >= 1
/// @param hosts number of hosts, in [1, n]
Placement block_placement(int rank, int n, int hosts) noexcept;

/// @brief The launcher side of the rendezvous: owns the listening socket and
/// the client connections, runs the collectives. Single-threaded; the
/// launcher's poll loop drives it through fill_pollfds()/handle().
class Server {
 public:
  /// @param listen_fd a listening, non-blocking Unix socket (owned afterwards)
  /// @param size number of ranks in the job
  /// @param secret the job secret clients must present
  Server(int listen_fd, int size, const Secret& secret);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// @brief Appends one pollfd per socket the server wants watched.
  /// @param out the poll set being built (entries appended at its end)
  void fill_pollfds(std::vector<pollfd>& out) const;
  /// @brief Processes the events of the entries fill_pollfds() appended.
  /// @param fds the poll set after poll() returned
  /// @param first index of the first entry fill_pollfds() appended
  void handle(const std::vector<pollfd>& fds, std::size_t first);
  /// @brief Milliseconds until the next internal deadline (unauthenticated
  /// clients are dropped after a few seconds), or -1 for none.
  [[nodiscard]] int timeout_ms() const;

  /// @brief Reports that @p rank's process ended. A failure pushes a
  /// rank_dead event to every other connected rank; either way a collective
  /// the rank has not joined fails on every waiting rank.
  /// @param rank the rank
  /// @param failed true if it exited non-zero or was killed
  /// @param why human-readable description ("exited with status 3")
  void rank_exited(int rank, bool failed, const std::string& why);

  /// @brief Number of connections dropped for failing authentication.
  [[nodiscard]] int rejected() const noexcept;

  /// @brief Protocol violations by authenticated ranks since the last call,
  /// one line each ("rank 1 broke the rendezvous protocol: ..."). Such a rank
  /// is disconnected and treated as gone: the open collective and every later
  /// one fail on the other ranks with the same reason, and it cannot
  /// reconnect. A violation is a malformed header, a message only strata-run
  /// sends, a second hello, a second contribution to the open round, a
  /// barrier with a payload, an allgather blob over kMaxPayload / size, or a
  /// connection closed in the middle of a message.
  [[nodiscard]] std::vector<std::string> take_violations();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::detail::rdv

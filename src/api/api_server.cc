#include "api/api_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <boost/asio.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <thread>
#include <unordered_map>

#include "api/event_stream_queue.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/socket_path.h"

namespace tern {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using local = asio::local::stream_protocol;

namespace {
class Session;
}  // namespace

struct ApiServer::Impl {
  Impl(Dispatch d, EventLog& e, ApiServerOptions o)
      : ioc(std::make_shared<asio::io_context>()), acceptor(*ioc), shutdown_timer(*ioc),
        dispatch(std::move(d)), events(e), opts(o) {}
  void accept();
  void begin_shutdown(std::chrono::milliseconds grace);
  void session_closed(Session* s);

  // Shared so that a reply arriving after shutdown() still has a (stopped) io_context to post to.
  std::shared_ptr<asio::io_context> ioc;
  local::acceptor acceptor;
  asio::steady_timer shutdown_timer;
  Dispatch dispatch;
  EventLog& events;
  ApiServerOptions opts;
  std::string path;
  // The socket file this server bound: shutdown removes the path only while it still is this
  // file, not a socket another tern bound there since.
  BoundSocketPath bound;
  std::thread thread;
  bool stopping = false;  // io thread only
  bool shut_down = false;  // caller's thread only
  size_t event_streams = 0;  // io thread only
  /// Connections beyond max_connections that are answered 503 (each for at most a second);
  /// further ones are closed unanswered.
  static constexpr size_t kMaxRefusing = 64;
  std::unordered_map<Session*, std::shared_ptr<Session>> sessions;  // io thread only
};

namespace {

// One client connection. Everything runs on the server's single io thread; the only other thread
// that touches a Session is none: replies and events are posted to the io thread first.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ApiServer::Impl& srv, local::socket s)
      : srv_(srv),
        sock_(std::move(s)),
        timer_(*srv.ioc),
        buf_(srv.opts.max_header_bytes + kReadAhead) {}

  void start() { read_request(); }

  /// Answers with `r` and closes (connection limit).
  void reject(ApiResponse r) {
    keep_alive_ = false;
    write(std::move(r));
  }

  void begin_shutdown() {
    if (events_mode_) {
      close_after_flush_ = true;
      flush();
    } else {
      close();
    }
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    auto self = shared_from_this();  // erase() below may drop the last owner
    if (subscribed_) srv_.events.unsubscribe(sub_id_);
    subscribed_ = false;
    if (events_mode_) --srv_.event_streams;
    beast::error_code ig;
    timer_.cancel();
    sock_.shutdown(local::socket::shutdown_both, ig);
    sock_.close(ig);
    srv_.session_closed(this);
  }

  void write(ApiResponse r) {
    if (closed_) return;
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "tern");
    if (!r.content_type.empty()) res->set(http::field::content_type, r.content_type);
    res->body() = std::move(r.body);
    res->keep_alive(keep_alive_ && !srv_.stopping);
    res->prepare_payload();
    // A client that does not take its answer (it pipelines requests and never reads, or is
    // stopped) must not hold its connection slot for ever: the answer has read_timeout too.
    const uint64_t gen = ++write_gen_;
    writing_response_ = true;
    timer_.expires_after(srv_.opts.read_timeout);
    timer_.async_wait([weak = weak_from_this(), gen](beast::error_code ec) {
      if (ec) return;
      auto self = weak.lock();
      if (self && self->writing_response_ && self->write_gen_ == gen) self->close();
    });
    http::async_write(sock_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      self->writing_response_ = false;
      self->timer_.cancel();
      if (ec) {
        self->close();
        return;
      }
      if (!res->keep_alive()) {
        self->linger();
        return;
      }
      self->read_request();
    });
  }

 private:
  // The answer is out and the connection ends. Closing at once, with the client's request (or
  // the rest of its body) unread, makes the kernel fail the client's next write with EPIPE or its
  // read with ECONNRESET, so it may never see the answer (tern ctl under the connection limit
  // said "write request: Broken pipe" instead of the 503). Stop sending, drop what still arrives
  // until the client closes, for at most a second and kMaxLingerBytes, then close.
  void linger() {
    if (closed_) return;
    beast::error_code ig;
    sock_.shutdown(local::socket::shutdown_send, ig);
    timer_.expires_after(
        std::min<std::chrono::milliseconds>(srv_.opts.read_timeout, std::chrono::seconds(1)));
    timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->close();
    });
    drain();
  }
  void drain() {
    sock_.async_read_some(asio::buffer(scratch_),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->lingered_ += n;
                            if (ec || self->lingered_ > kMaxLingerBytes) {
                              self->close();
                            } else {
                              self->drain();
                            }
                          });
  }

  void read_request() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(srv_.opts.max_header_bytes));
    parser_->body_limit(srv_.opts.max_body_bytes);
    timed_out_ = false;
    timer_.expires_after(srv_.opts.read_timeout);
    timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) {
        self->timed_out_ = true;
        beast::error_code ig;
        self->sock_.cancel(ig);
      }
    });
    http::async_read(sock_, buf_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    timer_.cancel();
    if (closed_) return;
    keep_alive_ = false;  // every error answer closes the connection
    if (timed_out_) {
      // An idle kept-alive connection just ends; a half-sent request gets 408.
      if (parser_->got_some() || buf_.size() > 0)
        write(ApiResponse::error(408, "request not received in full within " +
                                          std::to_string(srv_.opts.read_timeout.count()) + " ms"));
      else
        close();
      return;
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      close();
      return;
    }
    if (ec == http::error::body_limit) {
      write(ApiResponse::error(413, "request body larger than " +
                                        std::to_string(srv_.opts.max_body_bytes) + " bytes"));
      return;
    }
    if (ec == http::error::buffer_overflow) {
      // Chunk extensions and trailers count toward neither limit: they must fit in buf_.
      write(ApiResponse::error(400, "request framing (a chunk header or trailer) larger than " +
                                        std::to_string(buf_.max_size()) + " bytes"));
      return;
    }
    if (ec == http::error::header_limit) {
      write(ApiResponse::error(431, "request head larger than " +
                                        std::to_string(srv_.opts.max_header_bytes) + " bytes"));
      return;
    }
    if (ec) {
      if (ec.category() == http::make_error_code(http::error::bad_target).category())
        write(ApiResponse::error(400, "malformed HTTP request: " + ec.message()));
      else
        close();
      return;
    }
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    std::string method(req.method_string());
    std::string target(req.target());
    auto parsed = parse_api_request(method, target, req.body());
    if (!parsed) {
      write(std::move(parsed.error()));
      return;
    }
    if (std::holds_alternative<api::GetEvents>(*parsed)) {
      start_events();
      return;
    }
    std::weak_ptr<Session> weak = shared_from_this();
    srv_.dispatch(std::move(*parsed), [ioc = srv_.ioc, weak](ApiResponse r) {
      asio::post(*ioc, [weak, r = std::move(r)]() mutable {
        if (auto self = weak.lock()) self->write(std::move(r));
      });
    });
  }

  // GET /tern/events: a close-delimited body of JSON lines (the backlog, then live events). Live
  // lines wait in queue_ (bounded); the io thread is woken only when it has to start writing.
  void start_events() {
    if (srv_.event_streams >= srv_.opts.max_event_streams) {
      keep_alive_ = false;
      write(ApiResponse::error(503, "too many event streams (limit " +
                                        std::to_string(srv_.opts.max_event_streams) + ")"));
      return;
    }
    events_mode_ = true;
    ++srv_.event_streams;
    const size_t limit = srv_.opts.max_event_queue_bytes;
    queue_ = std::make_shared<EventStreamQueue>(
        limit, json_text({{"event", "dropped"},
                          {"reason", "this subscriber fell more than " + std::to_string(limit) +
                                         " bytes of events behind; reconnect for the backlog"}}) +
                   "\n");
    out_ =
        "HTTP/1.1 200 OK\r\nServer: tern\r\nContent-Type: application/x-ndjson\r\n"
        "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
    std::vector<std::string> backlog;
    std::weak_ptr<Session> weak = shared_from_this();
    // Runs under the EventLog's lock on the publishing thread: only queue and post.
    sub_id_ = srv_.events.subscribe(
        [ioc = srv_.ioc, weak, q = queue_](const std::string& line) {
          auto pushed = q->push(line);
          if (pushed != EventStreamQueue::Push::kWake &&
              pushed != EventStreamQueue::Push::kOverflowed)
            return;
          asio::post(*ioc, [weak] {
            if (auto self = weak.lock()) self->on_queued();
          });
        },
        backlog);
    subscribed_ = true;
    for (auto& l : backlog) out_ += l;
    flush();
    watch_for_close();
  }

  // Lines arrived in queue_, or it overflowed: the subscriber is dropped once the drop line is
  // out, and gets read_timeout for that.
  void on_queued() {
    if (closed_) return;
    if (queue_->overflowed() && subscribed_) {
      srv_.events.unsubscribe(sub_id_);
      subscribed_ = false;
      close_after_flush_ = true;
      timer_.expires_after(srv_.opts.read_timeout);
      timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
        if (ec) return;
        if (auto self = weak.lock()) self->close();
      });
    }
    flush();
  }

  // The subscriber closing ends the stream. End of input alone does not: a client that only shut
  // down its sending side (socat, nc -N after the request) still reads, and the end of the stream
  // means "tern exited". Such a client's later close shows as a write error at the next event.
  void watch_for_close() {
    sock_.async_read_some(asio::buffer(scratch_),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (!ec) {
                              self->watch_for_close();
                            } else if (ec != asio::error::eof || !self->peer_still_reading()) {
                              self->close();
                            }
                          });
  }

  // After end of input: true if the peer only half-closed (a peer that closed altogether leaves
  // this socket hung up both ways, POLLHUP).
  bool peer_still_reading() {
    pollfd p{sock_.native_handle(), POLLOUT, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) == 0;
  }

  // Writes out_ (the head and backlog at first), then whatever queue_ holds, until both are empty.
  void flush() {
    if (closed_ || writing_) return;
    if (out_.empty()) {
      out_ = queue_->take();
      out_from_queue_ = out_.size();
    }
    if (out_.empty()) {
      if (close_after_flush_) close();
      return;
    }
    writing_ = true;
    asio::async_write(sock_, asio::buffer(out_),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->writing_ = false;
                        if (ec) {
                          self->close();
                          return;
                        }
                        self->queue_->written(std::exchange(self->out_from_queue_, 0));
                        self->out_.clear();
                        self->flush();
                      });
  }

  // What the HTTP parser may hold unparsed beyond a request head. Bodies are parsed out of buf_
  // as they arrive; without a cap, one chunk extension or trailer of any size was buffered whole
  // (4 clients streaming a chunk extension for 4 s grew tern by 1.8 GiB).
  static constexpr size_t kReadAhead = 64 * 1024;

  ApiServer::Impl& srv_;
  local::socket sock_;
  asio::steady_timer timer_;
  beast::flat_buffer buf_;  // max_size(): max_header_bytes + kReadAhead
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = true;
  bool timed_out_ = false;
  static constexpr size_t kMaxLingerBytes = 1 << 20;
  size_t lingered_ = 0;            // bytes dropped by drain()
  bool writing_response_ = false;  // an HTTP answer is being written (write())
  uint64_t write_gen_ = 0;         // which write() the write timer belongs to
  bool closed_ = false;
  // Event stream state.
  bool events_mode_ = false;
  bool subscribed_ = false;
  bool writing_ = false;
  bool close_after_flush_ = false;
  uint64_t sub_id_ = 0;
  std::shared_ptr<EventStreamQueue> queue_;  // shared with the EventLog subscriber
  std::string out_;                          // being written
  size_t out_from_queue_ = 0;                // bytes of out_ taken from queue_
  std::array<char, 256> scratch_{};
};

}  // namespace

void ApiServer::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, local::socket s) {
    if (ec) {
      if (ec == asio::error::operation_aborted || stopping) return;
      static RateLimit limit;
      TERN_LOG_RATELIMITED(limit, warn, "API socket accept: {}", ec.message());
      accept();
      return;
    }
    if (sessions.size() >= opts.max_connections + kMaxRefusing) {
      // A flood: refusing politely (503, then lingering) would hold a descriptor per attempt.
      beast::error_code ig;
      s.close(ig);
      accept();
      return;
    }
    auto session = std::make_shared<Session>(*this, std::move(s));
    bool over = sessions.size() >= opts.max_connections;
    sessions.emplace(session.get(), session);
    if (over)
      session->reject(ApiResponse::error(503, "too many connections (limit " +
                                                  std::to_string(opts.max_connections) + ")"));
    else
      session->start();
    accept();
  });
}

void ApiServer::Impl::session_closed(Session* s) {
  sessions.erase(s);
  if (stopping && sessions.empty()) shutdown_timer.cancel();
}

void ApiServer::Impl::begin_shutdown(std::chrono::milliseconds grace) {
  stopping = true;
  beast::error_code ig;
  acceptor.close(ig);
  std::vector<std::shared_ptr<Session>> all;
  for (auto& [p, s] : sessions) all.push_back(s);
  for (auto& s : all) s->begin_shutdown();
  if (sessions.empty()) return;
  shutdown_timer.expires_after(grace);
  shutdown_timer.async_wait([this](beast::error_code) {
    std::vector<std::shared_ptr<Session>> left;
    for (auto& [p, s] : sessions) left.push_back(s);
    for (auto& s : left) s->close();
  });
}

ApiServer::ApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ApiServer::~ApiServer() {
  shutdown();
  // Sessions hold sockets of this io_context: drop them before it goes.
  impl_->sessions.clear();
}

void ApiServer::shutdown(std::chrono::milliseconds grace) {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  asio::post(*impl_->ioc, [impl = impl_.get(), grace] { impl->begin_shutdown(grace); });
  if (impl_->thread.joinable()) impl_->thread.join();
  // Only our own socket file: after a `rm` of the path (or a clear_stale_socket() of another
  // tern that found it unanswered once this server stopped accepting), the path may name another
  // server's socket.
  impl_->bound.remove();
}

namespace {

// A socket file at `path` that nobody accepts on is left over from a dead tern: remove it.
Result<void> clear_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return fail_errno("--api-sock", path);
  }
  if (!S_ISSOCK(st.st_mode)) return fail("--api-sock", path + ": exists and is not a socket");
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return fail_errno("socket");
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0)
    return fail("--api-sock", path + ": another process is serving this socket");
  if (::unlink(path.c_str()) != 0) return fail_errno("--api-sock", "unlink " + path);
  return {};
}

}  // namespace

Result<std::unique_ptr<ApiServer>> ApiServer::start(const std::string& socket_path,
                                                    Dispatch dispatch, EventLog& events,
                                                    ApiServerOptions options) {
  if (socket_path.empty()) return fail("--api-sock", "empty path");
  if (socket_path.size() >= sizeof(sockaddr_un::sun_path))
    return fail("--api-sock", socket_path + ": longer than " +
                                  std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  TRY(clear_stale_socket(socket_path));
  auto impl = std::make_unique<Impl>(std::move(dispatch), events, options);
  impl->path = socket_path;
  beast::error_code ec;
  impl->acceptor.open(local(), ec);
  if (!ec) impl->acceptor.bind(local::endpoint(socket_path), ec);
  if (ec) return fail_code(ec.value(), "--api-sock", "bind " + socket_path);
  ASSIGN_OR_RETURN(impl->bound, BoundSocketPath::after_bind(socket_path, "--api-sock"));
  impl->acceptor.listen(64, ec);
  if (ec) return fail_code(ec.value(), "--api-sock", "listen " + socket_path);
  impl->accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    pthread_setname_np(pthread_self(), "api");
    for (;;) {
      try {
        raw->ioc->run();
        return;
      } catch (const std::exception& e) {  // thread entry: log, keep serving
        spdlog::error("API server: {}", e.what());
      }
    }
  });
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(impl)));
}

}  // namespace tern

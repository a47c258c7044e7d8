#include "kernel/mcp_http/http_server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "kernel/mcp/mcp_revision.hpp"
#include "kernel/protocol/bounded_json.hpp"
#include "kernel/protocol/wire_message.hpp"
#include "sandbox/os/ascii.hpp"
#include "sandbox/os/fd.hpp"

namespace belljar {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using ClientKey = SessionRouter::ClientKey;
using Caller = SessionRouter::Caller;

namespace {

constexpr auto kHeaderWait = std::chrono::seconds(30);   // an idle connection's next request
constexpr auto kBodyWait = std::chrono::seconds(120);    // 64 MiB from a slow link
constexpr auto kWriteWait = std::chrono::seconds(60);    // a write that makes no progress
constexpr auto kCommitAfter = std::chrono::seconds(10);  // a silent call becomes a stream
constexpr auto kKeepalive = std::chrono::seconds(15);
constexpr auto kPeerCheck = std::chrono::seconds(1);
// The read buffer: a request's headers, or the chunk lines of its body (the outside review grew
// the server by a chunk extension that never ended).
constexpr size_t kMaxReadBuffer = kMaxMcpHeaders + (1u << 20);

// What the HTTP thread hands the router's loop.
struct Inbound {
  enum class Kind { add_client, message, exchange_closed, client_closed } kind;
  Caller caller;
  std::string text;  // the message; the reason a client closed
};

std::string reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

bool is_response(const json& message) {
  return message.is_object() && message.contains("id") &&
         (message.contains("result") || message.contains("error"));
}

std::string sse_event(std::string_view data) {
  std::string event = "event: message\ndata: ";
  event += data;  // one line: JSON as the router writes it has no newline
  event += "\n\n";
  return event;
}

std::string chunk(std::string_view data) {
  char size[20];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out += data;
  out += "\r\n";
  return out;
}

}  // namespace

class Connection;

struct McpHttpServer::Impl {
  McpHttpOptions options;
  HttpHostRule hosts;
  bool stopped = false;

  std::mutex mutex;  // guards inbox
  std::deque<Inbound> inbox;
  Fd wake;

  // The HTTP thread's own.
  std::map<std::string, ClientKey> clients_by_id;  // Mcp-Session-Id
  std::map<ClientKey, std::string> id_of;
  // A request being answered holds its connection: nothing else may be pending on it (a
  // pipelined request read already, the outside review found it destroyed mid-answer).
  std::map<uint64_t, std::shared_ptr<Connection>> exchanges;
  // Connections in the order they came, for the cap: the oldest that never showed the token
  // makes room for a new one.
  std::deque<std::weak_ptr<Connection>> arrivals;
  std::map<ClientKey, std::weak_ptr<Connection>> standing;  // GET streams
  ClientKey next_client = SessionRouter::kFirstClient + 1;
  uint64_t next_exchange = 1;
  size_t connections = 0;

  // Last, so they go first: the connections its handlers hold end while the above still is.
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  net::steady_timer accept_pause{io};
  std::thread thread;

  explicit Impl(McpHttpOptions given)
      : options(std::move(given)), hosts(options.address, options.proxied_hosts) {}

  void push(Inbound inbound) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      inbox.push_back(std::move(inbound));
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake.get(), &one, sizeof one);
  }
  void accept();
  void make_room();
  void deliver(const Caller& caller, std::string line);
  void forget_client(ClientKey key);
};

// One TCP connection: requests read one at a time; while one is answered the next request's
// header is read already, so a client that closes the connection is seen at once (the
// stateless revision's cancel).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(McpHttpServer::Impl& server, tcp::socket socket)
      : server_(server),
        socket_(std::move(socket)),
        read_deadline_(socket_.get_executor()),
        write_deadline_(socket_.get_executor()),
        stream_timer_(socket_.get_executor()),
        peer_timer_(socket_.get_executor()) {
    server_.connections++;
  }
  ~Connection() { uncount(); }
  bool proven() const { return proven_; }
  bool closing() const { return mode_ == Mode::closing; }

  void start() { read_header(); }
  void refuse_busy() {
    respond(503, {}, "the server holds its most connections; try again\n", "text/plain", true);
  }
  // What the router sent this connection's open request.
  void exchange_message(std::string line);
  // A notification of the MCP session whose GET stream this is.
  void standing_message(std::string line) {
    if (mode_ == Mode::standing) write(chunk(sse_event(line)));
  }
  void close();

 private:
  enum class Mode { reading, exchange, stream, standing, closing };

  void uncount() {
    if (counted_) server_.connections--;
    counted_ = false;
  }

  void read_header();
  // While a request is answered or a stream stands: waits, reading nothing, to see the client
  // go (its close cancels the call); a request it pipelined meanwhile stays in the socket for
  // read_header once the answer is out.
  void watch();
  void watch_pipelined();
  // A refusal made before the body was read: the connection ends with it, or the body would
  // be read as the next request (the outside review's request smuggling).
  bool leave_after() const {
    return !keep_alive_ || parser_->chunked() ||
           (parser_->content_length() && *parser_->content_length() > 0);
  }
  void on_header(beast::error_code ec);
  void on_body(beast::error_code ec);
  void handle_post();
  void handle_get();
  void handle_delete();
  void begin_exchange(Caller caller, bool initialize, bool modern);
  void finish_exchange();
  void commit_stream();
  void keep_alive();
  std::optional<std::string> header(std::string_view name) const;

  void respond(int status, std::vector<std::pair<std::string, std::string>> headers,
               const std::string& body, const char* type, bool close_after);
  void respond_error(int status, const json& id, int code, const std::string& message,
                     bool close_after = false);
  void write(std::string bytes);
  void write_next();

  McpHttpServer::Impl& server_;
  tcp::socket socket_;
  beast::flat_buffer buffer_{kMaxReadBuffer};
  std::optional<http::request_parser<http::string_body>> parser_;
  net::steady_timer read_deadline_, write_deadline_, stream_timer_, peer_timer_;
  Mode mode_ = Mode::reading;
  bool oversized_ = false;  // its Content-Length is past kMaxMcpBody
  bool proven_ = false;     // a request of it carried the token
  bool counted_ = true;     // among the server's connections
  bool reading_ = false;
  bool watching_ = false;
  bool close_after_write_ = false;
  bool keep_alive_ = true;

  // The request being answered.
  uint64_t exchange_ = 0;
  Caller caller_;
  bool accepts_stream_ = false;
  bool initialize_ = false;
  bool modern_ = false;
  std::string minted_id_;  // an initialize's Mcp-Session-Id

  std::deque<std::string> out_;
  size_t queued_ = 0;
  bool writing_ = false;
};

// -- reading requests ----------------------------------------------------------------------

void Connection::read_header() {
  if (reading_ || mode_ == Mode::closing) return;
  parser_.emplace();
  oversized_ = false;
  parser_->header_limit(kMaxMcpHeaders);
  parser_->body_limit(kMaxMcpBody);
  reading_ = true;
  if (mode_ == Mode::reading) {
    read_deadline_.expires_after(kHeaderWait);
    read_deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->close();  // an idle connection, or a header sent a byte at a time
    });
  }
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            self->reading_ = false;
                            self->on_header(ec);
                          });
}

void Connection::watch() {
  if (watching_ || mode_ == Mode::closing) return;
  watching_ = true;
  // Readiness only: nothing is read, so the next request stays where read_header finds it.
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
    self->watching_ = false;
    if (ec || self->mode_ == Mode::closing) return;
    if (self->mode_ != Mode::exchange && self->mode_ != Mode::stream &&
        self->mode_ != Mode::standing)
      return;  // answered meanwhile: read_header has the socket now
    char byte;
    ssize_t n = ::recv(self->socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      self->close();  // the client went away: its call is cancelled
    } else if (n < 0) {
      self->watch();
    } else if (self->mode_ == Mode::standing) {
      self->close();  // a GET stream carries no requests
    } else {
      self->watch_pipelined();  // a request waits behind this one: its socket state is asked
    }
  });
}

void Connection::watch_pipelined() {
  // Behind data the client sent ahead, its close cannot be read: TCP says it instead (the
  // outside review left a call running, and its connection held, after such a client left).
  peer_timer_.expires_after(kPeerCheck);
  peer_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || (self->mode_ != Mode::exchange && self->mode_ != Mode::stream)) return;
    tcp_info info{};
    socklen_t size = sizeof info;
    if (::getsockopt(self->socket_.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &size) != 0 ||
        info.tcpi_state == TCP_CLOSE_WAIT || info.tcpi_state == TCP_CLOSE) {
      self->close();
      return;
    }
    self->watch_pipelined();
  });
}

void Connection::on_header(beast::error_code ec) {
  if (mode_ == Mode::closing) return;
  // Headers too large, or a Content-Length past the bound: refused below, in turn (after the
  // token). Anything else is the client gone (its open request is cancelled) or not HTTP.
  bool refused = ec == http::error::header_limit || ec == http::error::body_limit;
  if (ec && !refused) {
    close();
    return;
  }
  if (ec == http::error::header_limit) {
    respond(431, {}, "the request's headers are larger than 16 KiB\n", "text/plain", true);
    return;
  }
  oversized_ = ec == http::error::body_limit;
  read_deadline_.cancel();
  auto& request = parser_->get();
  keep_alive_ = request.keep_alive();
  std::string target(request.target());
  if (target.substr(0, target.find('?')) != "/mcp") {
    respond(404, {}, "MCP is served at /mcp\n", "text/plain", leave_after());
    return;
  }
  // The token before anything else of the request is looked at.
  if (!bearer_matches(header("authorization").value_or(""), server_.options.token)) {
    respond(401, {{"WWW-Authenticate", "Bearer"}},
            "a bearer token is required (the one `belljar mcp --http` printed, or "
            "BELLJAR_MCP_TOKEN)\n",
            "text/plain", true);
    return;
  }
  proven_ = true;
  if (!server_.hosts.host_allowed(header("host").value_or(""))) {
    respond(403, {}, "the Host header names another server\n", "text/plain", true);
    return;
  }
  std::optional<std::string> origin = header("origin");
  if (!server_.hosts.origin_allowed(
          origin ? std::optional<std::string_view>(*origin) : std::nullopt,
          header("host").value_or(""))) {
    respond(403, {}, "a page of another origin may not call this server\n", "text/plain", true);
    return;
  }
  switch (request.method()) {
    case http::verb::post:
      break;
    case http::verb::get:
      handle_get();
      return;
    case http::verb::delete_:
      handle_delete();
      return;
    default:
      respond(405, {{"Allow", "POST, GET, DELETE"}}, "POST, GET or DELETE\n", "text/plain", true);
      return;
  }
  if (oversized_ || (parser_->content_length() && *parser_->content_length() > kMaxMcpBody)) {
    respond(413, {}, "the body is larger than 64 MiB\n", "text/plain", true);
    return;
  }
  if (!parser_->content_length() && !parser_->chunked()) {
    respond(411, {}, "a POST says its length\n", "text/plain", true);
    return;
  }
  std::string type = ascii_lower(header("content-type").value_or(""));
  if (type.rfind("application/json", 0) != 0) {
    respond(415, {}, "a POST carries application/json\n", "text/plain", true);
    return;
  }
  // A client that waits to be asked for its body (curl, past 1 MB) is asked: it passed.
  if (ascii_lower(header("expect").value_or("")) == "100-continue")
    write("HTTP/1.1 100 Continue\r\n\r\n");
  read_deadline_.expires_after(kBodyWait);
  read_deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->close();
  });
  reading_ = true;
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->reading_ = false;
                     self->on_body(ec);
                   });
}

void Connection::on_body(beast::error_code ec) {
  read_deadline_.cancel();
  if (ec == http::error::body_limit) {
    respond(413, {}, "the body is larger than 64 MiB\n", "text/plain", true);
    return;
  }
  if (ec) {
    close();
    return;
  }
  handle_post();
}

std::optional<std::string> Connection::header(std::string_view name) const {
  const auto& fields = parser_->get();
  auto it = fields.find(beast::string_view(name.data(), name.size()));
  if (it == fields.end()) return std::nullopt;
  return std::string(it->value());
}

void Connection::handle_post() {
  PostedMessage posted = classify_posted(parser_->get().body());
  if (posted.kind == PostedMessage::Kind::invalid) {
    int code = posted.problem.rfind("parse error", 0) == 0 ? -32700 : -32600;
    respond_error(400, nullptr, code, posted.problem);
    return;
  }
  json id = posted.body.value("id", json());
  std::optional<std::string> session_id = header("mcp-session-id");
  std::optional<NamedRevision> named =
      revision_named_in(posted.body.value("params", json::object()));
  Caller caller{SessionRouter::kFirstClient, 0};
  bool initialize = false;
  if (session_id) {
    auto known = server_.clients_by_id.find(*session_id);
    if (known == server_.clients_by_id.end()) {
      respond_error(404, id, -32600,
                    "unknown MCP session: it ended or idled out; initialize again");
      return;
    }
    caller.client = known->second;
  } else if (posted.method == "initialize" && posted.kind == PostedMessage::Kind::request) {
    initialize = true;
  } else if (!named && posted.method != "server/discover" && posted.method != "ping") {
    respond_error(400, id, -32600,
                  "an Mcp-Session-Id is required: initialize first (or name a stateless "
                  "revision in _meta)");
    return;
  }
  if (std::optional<std::string> version = header("mcp-protocol-version");
      version && !mcp_revision(*version)) {
    respond_error(400, id, -32600, "unsupported MCP-Protocol-Version: " + version->substr(0, 40));
    return;
  }
  if (named && named->revision && !named->revision->handshake) {
    auto mismatch = modern_header_mismatch(posted.body, std::string(named->revision->version),
                                           [this](std::string_view name) { return header(name); });
    if (mismatch) {
      respond_error(400, id, kHeaderMismatch, *mismatch);
      return;
    }
  }
  std::string line = dump_json(posted.body);
  if (posted.kind != PostedMessage::Kind::request) {
    // A notification or a response is taken, never answered. The stateless revision has no
    // notifications for the server; the others go to the router.
    if (posted.kind == PostedMessage::Kind::notification && !(named && !session_id))
      server_.push({Inbound::Kind::message, caller, std::move(line)});
    respond(202, {}, "", nullptr, !keep_alive_);
    return;
  }
  if (initialize) {
    minted_id_ = new_uuid();
    caller.client = server_.next_client++;
    server_.clients_by_id[minted_id_] = caller.client;
    server_.id_of[caller.client] = minted_id_;
    server_.push({Inbound::Kind::add_client, caller, {}});
  }
  std::string accept = header("accept").value_or("");
  accepts_stream_ = accept.find("text/event-stream") != std::string::npos;
  begin_exchange(caller, initialize, named && named->revision && !named->revision->handshake);
  server_.push({Inbound::Kind::message, caller_, std::move(line)});
}

void Connection::handle_get() {
  std::optional<std::string> session_id = header("mcp-session-id");
  if (!session_id) {
    respond(405, {{"Allow", "POST, DELETE"}},
            "GET streams an MCP session's notifications: it needs an Mcp-Session-Id\n",
            "text/plain", leave_after());
    return;
  }
  auto known = server_.clients_by_id.find(*session_id);
  if (known == server_.clients_by_id.end()) {
    respond(404, {}, "unknown MCP session\n", "text/plain", leave_after());
    return;
  }
  if (leave_after() && keep_alive_) {  // a GET with a body: refused whole
    respond(400, {}, "a GET carries no body\n", "text/plain", true);
    return;
  }
  if (auto old = server_.standing[known->second].lock()) old->close();  // the newest one stands
  server_.standing[known->second] = weak_from_this();
  mode_ = Mode::standing;
  write(
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  keep_alive();
  watch();  // only to see the client go
}

void Connection::handle_delete() {
  std::optional<std::string> session_id = header("mcp-session-id");
  if (!session_id) {
    respond(400, {}, "DELETE ends an MCP session: it needs an Mcp-Session-Id\n", "text/plain",
            leave_after());
    return;
  }
  auto known = server_.clients_by_id.find(*session_id);
  if (known == server_.clients_by_id.end()) {
    respond(404, {}, "unknown MCP session\n", "text/plain", leave_after());
    return;
  }
  ClientKey key = known->second;
  server_.forget_client(key);
  server_.push({Inbound::Kind::client_closed, {key, 0}, "the client ended its MCP session"});
  respond(204, {}, "", nullptr, leave_after());
}

// -- answering a request -------------------------------------------------------------------

void Connection::begin_exchange(Caller caller, bool initialize, bool modern) {
  exchange_ = server_.next_exchange++;
  caller_ = {caller.client, exchange_};
  initialize_ = initialize;
  modern_ = modern;
  mode_ = Mode::exchange;
  server_.exchanges[exchange_] = shared_from_this();
  if (accepts_stream_) {
    stream_timer_.expires_after(kCommitAfter);
    stream_timer_.async_wait(
        [self = shared_from_this(), exchange = exchange_](beast::error_code ec) {
          if (ec || self->exchange_ != exchange || self->mode_ != Mode::exchange) return;
          self->commit_stream();
          self->write(chunk(": the call runs\n\n"));
        });
  }
  watch();  // the client closing the connection is its cancel
}

void Connection::commit_stream() {
  mode_ = Mode::stream;
  stream_timer_.cancel();
  std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Transfer-Encoding: chunked\r\n";
  if (initialize_ && !minted_id_.empty()) head += "Mcp-Session-Id: " + minted_id_ + "\r\n";
  write(head + "\r\n");
  keep_alive();
}

void Connection::keep_alive() {
  stream_timer_.expires_after(kKeepalive);
  stream_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || (self->mode_ != Mode::stream && self->mode_ != Mode::standing)) return;
    self->write(chunk(": keepalive\n\n"));
    self->keep_alive();
  });
}

void Connection::exchange_message(std::string line) {
  if (mode_ != Mode::exchange && mode_ != Mode::stream) return;
  json message = json::parse(line, nullptr, false);
  if (!is_response(message)) {  // progress, output: the call's stream opens with the first
    if (mode_ == Mode::exchange) {
      if (!accepts_stream_) return;
      commit_stream();
    }
    write(chunk(sse_event(line)));
    return;
  }
  bool failed = message.contains("error");
  if (initialize_ && failed) {  // no MCP session came of it
    server_.forget_client(caller_.client);
    server_.push({Inbound::Kind::client_closed, {caller_.client, 0}, "its initialize failed"});
    minted_id_.clear();
  }
  if (mode_ == Mode::stream) {
    write(chunk(sse_event(line)) + chunk(""));
    if (!keep_alive_) close_after_write_ = true;  // it asked for Connection: close
  } else {
    int status = 200;
    if (modern_ && failed && message["error"].value("code", json()).is_number_integer())
      status = status_for_error(message["error"]["code"].get<int>());
    std::vector<std::pair<std::string, std::string>> headers;
    if (initialize_ && !minted_id_.empty()) headers.emplace_back("Mcp-Session-Id", minted_id_);
    respond(status, std::move(headers), line, "application/json", !keep_alive_);
  }
  finish_exchange();
}

void Connection::finish_exchange() {
  server_.exchanges.erase(exchange_);
  exchange_ = 0;
  stream_timer_.cancel();
  initialize_ = false;
  minted_id_.clear();
  if (mode_ == Mode::closing) return;
  mode_ = Mode::reading;
  if (close_after_write_) return;
  peer_timer_.cancel();
  read_header();  // nothing was read meanwhile: a pipelined request is still to come
}

// -- writing -------------------------------------------------------------------------------

void Connection::respond(int status, std::vector<std::pair<std::string, std::string>> headers,
                         const std::string& body, const char* type, bool close_after) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  for (auto& [name, value] : headers) head += name + ": " + value + "\r\n";
  if (type) head += std::string("Content-Type: ") + type + "\r\n";
  if (status != 204) head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (close_after) head += "Connection: close\r\n";
  head += "\r\n";
  write(head + body);
  if (close_after) {
    close_after_write_ = true;
    read_deadline_.cancel();
  } else if (mode_ == Mode::reading && !reading_) {
    read_header();
  }
}

void Connection::respond_error(int status, const json& id, int code, const std::string& message,
                               bool close_after) {
  json error = {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
  respond(status, {}, dump_json(error), "application/json", close_after || !keep_alive_);
}

void Connection::write(std::string bytes) {
  if (mode_ == Mode::closing) return;
  // A client that does not read: past the bound its connection ends (one answer larger than
  // the bound is let through alone, as stdio would).
  if (queued_ > 0 && queued_ + bytes.size() > kMaxQueuedOutput) {
    close();
    return;
  }
  queued_ += bytes.size();
  out_.push_back(std::move(bytes));
  write_next();
}

void Connection::write_next() {
  if (writing_ || out_.empty() || mode_ == Mode::closing) return;
  writing_ = true;
  write_deadline_.expires_after(kWriteWait);
  write_deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->close();
  });
  net::async_write(socket_, net::buffer(out_.front()),
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->writing_ = false;
                     self->write_deadline_.cancel();
                     // Closed meanwhile: the queue is left as it was (the outside review: a
                     // close between a write and its handler freed the written string twice).
                     if (self->mode_ == Mode::closing) return;
                     if (ec) {
                       self->close();
                       return;
                     }
                     self->queued_ -= self->out_.front().size();
                     self->out_.pop_front();
                     if (!self->out_.empty()) {
                       self->write_next();
                     } else if (self->close_after_write_) {
                       beast::error_code ignored;
                       self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
                       self->close();
                     }
                   });
}

void Connection::close() {
  if (mode_ == Mode::closing) return;
  Mode was = mode_;
  mode_ = Mode::closing;
  uncount();  // its slot is free at once: its handlers may linger a moment
  if (was == Mode::exchange || was == Mode::stream) {
    server_.exchanges.erase(exchange_);
    server_.push({Inbound::Kind::exchange_closed, caller_, {}});
    if (initialize_ && !minted_id_.empty()) {  // its answer never reached the client
      server_.forget_client(caller_.client);
      server_.push({Inbound::Kind::client_closed, {caller_.client, 0}, "the client went away"});
    }
  }
  read_deadline_.cancel();
  write_deadline_.cancel();
  stream_timer_.cancel();
  peer_timer_.cancel();
  beast::error_code ignored;
  socket_.close(ignored);
  // out_ stays: a write in flight still reads its front; it goes with the connection.
}

// -- the server ----------------------------------------------------------------------------

void McpHttpServer::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || stopped) return;
    if (ec) {
      // Out of descriptors or memory: the connection waits in the backlog, and accepting again
      // at once would spin (the third outside review). A pause, then again.
      accept_pause.expires_after(std::chrono::milliseconds(100));
      accept_pause.async_wait([this](beast::error_code waited) {
        if (!waited && !stopped) accept();
      });
      return;
    }
    {
      // Asio accepts without SOCK_CLOEXEC: a session started now must not hold the connection.
      int fd = socket.native_handle();
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      // A client whose machine vanished (no FIN) is found within two minutes of silence.
      int on = 1, idle = 60, interval = 10, count = 6;
      ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
      if (connections >= kMaxHttpConnections) make_room();
      auto connection = std::make_shared<Connection>(*this, std::move(socket));
      if (connections > kMaxHttpConnections) {
        connection->refuse_busy();
      } else {
        if (arrivals.size() > 4 * kMaxHttpConnections)
          std::erase_if(arrivals, [](const std::weak_ptr<Connection>& seen) {
            auto alive = seen.lock();
            return !alive || alive->proven() || alive->closing();
          });
        arrivals.push_back(connection);
        connection->start();
      }
    }
    accept();
  });
}

void McpHttpServer::Impl::make_room() {
  // Connections that sent no token hold nothing a client is owed: the oldest goes (the outside
  // review held every slot with connections that never finished a header, and locked the
  // token's holder out).
  while (!arrivals.empty()) {
    std::shared_ptr<Connection> oldest = arrivals.front().lock();
    arrivals.pop_front();
    if (oldest && !oldest->proven() && !oldest->closing()) {
      oldest->close();
      return;
    }
  }
}

void McpHttpServer::Impl::deliver(const Caller& caller, std::string line) {
  if (caller.exchange != 0) {
    auto it = exchanges.find(caller.exchange);
    if (it == exchanges.end()) return;                    // its client went away
    std::shared_ptr<Connection> connection = it->second;  // finishing erases the entry
    connection->exchange_message(std::move(line));
    return;
  }
  auto stream = standing.find(caller.client);
  if (stream == standing.end()) return;  // no GET stream open: the spec lets it go
  if (auto connection = stream->second.lock()) connection->standing_message(std::move(line));
}

void McpHttpServer::Impl::forget_client(ClientKey key) {
  if (auto id = id_of.find(key); id != id_of.end()) {
    clients_by_id.erase(id->second);
    id_of.erase(id);
  }
  if (auto stream = standing.find(key); stream != standing.end()) {
    if (auto connection = stream->second.lock()) connection->close();
    standing.erase(stream);
  }
}

McpHttpServer::McpHttpServer(McpHttpOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->wake = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->wake) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  beast::error_code ec;
  auto address = net::ip::make_address(impl_->options.address.host, ec);
  if (ec) throw std::runtime_error("--http: " + impl_->options.address.host + ": " + ec.message());
  tcp::endpoint endpoint(address, impl_->options.address.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error("--http " + impl_->options.address.url_host() + ":" +
                             std::to_string(impl_->options.address.port) + ": " + ec.message());
  ::fcntl(impl_->acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
  impl_->options.address.port = impl_->acceptor.local_endpoint().port();
  impl_->hosts = HttpHostRule(impl_->options.address,
                              impl_->options.proxied_hosts);  // with the port chosen
}

McpHttpServer::~McpHttpServer() {
  if (impl_->thread.joinable()) {
    net::post(impl_->io, [impl = impl_.get()] {
      impl->stopped = true;
      beast::error_code ignored;
      impl->acceptor.close(ignored);
      impl->accept_pause.cancel();
      impl->io.stop();
    });
    impl_->thread.join();
  }
  impl_->exchanges.clear();  // their sockets before the io_context they belong to
  impl_->arrivals.clear();
}

const HttpAddress& McpHttpServer::address() const {
  return impl_->options.address;
}

void McpHttpServer::open(SessionRouter& router) {
  router.start(SessionRouter::Clock::now());
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] {
    // The router's loop takes the signals; this thread blocks them all.
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    impl->io.run();
  });
}

void McpHttpServer::add_poll_items(std::vector<pollfd>& items) {
  items.push_back({impl_->wake.get(), POLLIN, 0});
}

void McpHttpServer::handle(const std::vector<pollfd>& items, size_t first, SessionRouter& router,
                           SessionRouter::Clock::time_point now) {
  if (!items[first].revents) return;
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = ::read(impl_->wake.get(), &count, sizeof count);
  std::deque<Inbound> taken;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    taken.swap(impl_->inbox);
  }
  for (auto& inbound : taken) {
    switch (inbound.kind) {
      case Inbound::Kind::add_client:
        router.add_client(inbound.caller.client);
        break;
      case Inbound::Kind::message:
        router.from_client(inbound.caller, inbound.text, now);
        break;
      case Inbound::Kind::exchange_closed:
        router.exchange_closed(inbound.caller);
        break;
      case Inbound::Kind::client_closed:
        router.client_closed(inbound.caller.client, inbound.text);
        break;
    }
  }
}

void McpHttpServer::deliver(const Caller& caller, std::string line) {
  net::post(impl_->io, [impl = impl_.get(), caller, line = std::move(line)]() mutable {
    impl->deliver(caller, std::move(line));
  });
}

void McpHttpServer::call_dropped(const Caller& caller) {
  net::post(impl_->io, [impl = impl_.get(), caller] {
    auto it = impl->exchanges.find(caller.exchange);
    if (it == impl->exchanges.end()) return;
    std::shared_ptr<Connection> connection = it->second;
    connection->close();  // no answer comes: the stream ends, and the connection with it
  });
}

void McpHttpServer::client_ended(SessionRouter::ClientKey key) {
  net::post(impl_->io, [impl = impl_.get(), key] { impl->forget_client(key); });
}

void McpHttpServer::stop() {
  net::post(impl_->io, [impl = impl_.get()] {
    impl->stopped = true;
    beast::error_code ignored;
    impl->acceptor.close(ignored);
  });
}

}  // namespace belljar

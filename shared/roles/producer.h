#pragma once

// The producer role in one call: on the adopter's SQLite file (its schema
// holds the outbox tables, CreateOutboxTable), a SqliteOutbox that stamps
// the retry policy on each row, a GroupWriter (shared/sqlite/internal/group_writer.h)
// whose thread commits the writes of many callers, with the consumer's
// acknowledgements, in one transaction per group, a Relay on a broker
// connection of its own that publishes each message right after its commit
// (and leaves a message held past its first retry to recovery), and an
// AckListener on another that closes rows as the consumer's replies come in.
// Both connections go through the AMQP dialer (reconnect with backoff); both
// sign and check with the process's Signing, which must be chosen (keys, or
// Signing::Unsigned()).
//
//   outbox::Producer::Options options;
//   options.amqp = url;
//   options.queue = "shop.orders";
//   options.signing = *outbox::Signing::FromKeyFile(keys_path);
//   OUTBOX_ASSIGN_OR_RETURN(auto producer, outbox::Producer::Start(*file, options));
//   OUTBOX_ASSIGN_OR_RETURN(std::string id, producer->Write(spec, write_my_rows));
//   producer->WaitUntilClosed(deadline);  // every row answered
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/amqp/amqp_url.h"
#include "shared/base/clock.h"
#include "shared/base/internal/ids.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/ack_listener.h"
#include "shared/outbox/internal/relay.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/message.h"
#include "shared/outbox/retry_policy.h"
#include "shared/outbox/signing.h"
#include "shared/outbox/transport.h"
#include "shared/sqlite/internal/group_writer.h"
#include "shared/sqlite/internal/sqlite_outbox.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

struct Config;   // config.h
class Recovery;  // recovery.h

// How long the producer's relay holds a message before it asks whether
// recovery took it over: the first retry delay (RetryPolicy::DelayAfter(1)),
// the shortest over the policy's topics, when a row may be due for recovery.
absl::Duration HandOverAfter(const RetryPolicy& retry);

class Producer {
 public:
  struct Options {
    AmqpUrl amqp;  // the broker (Start); Create takes the links instead
    // Required: where messages go unless their MessageSpec names a topic.
    // The relay's connection declares it.
    std::string queue;
    // Where the consumer's replies come back, unless a MessageSpec names
    // its reply_to; the ack listener's connection declares and reads it.
    // "": DefaultReplyQueue(queue), "<queue>.replies".
    std::string reply_queue;
    // Required: Signing::With(keys), Signing::FromKeyFile(path), or
    // Signing::Unsigned() by name. Unchosen, Start and Create fail.
    Signing signing;
    // Stamped on each row (its attempt budget). Recovery must run with the
    // same policy. The relay hands a message over to recovery once it was
    // held as long as its first retry delay (RetryPolicy::DelayAfter(1), the
    // shortest over the policy's topics).
    RetryPolicy retry;
    std::string name = "producer";  // connections "<name>-relay" and "<name>-acks"
    size_t window = 1024;           // the relay's unconfirmed messages in flight
    int reply_prefetch = 256;       // most replies the ack listener takes in one batch
    // What a reply acknowledges; empty: the library's format, the one the
    // consumer role answers with (DecodeDefaultReply, reply_format.h).
    ReplyDecoder decode_reply;
    std::string biz_key_label = "biz_key";  // the log key of a reply's business key
    // A crash point (shared/runtime/internal/failpoint.h) the relay evaluates once
    // confirms came in (RelayOptions::after_publish_failpoint); empty: none.
    std::string after_publish_failpoint;
    // One the ack listener evaluates before each write of acknowledgements
    // (AckListenerOptions::record_failpoint); empty: none.
    std::string record_acks_failpoint;
    // The group commit: most writes per transaction (max_batch), how long
    // acknowledgements wait for a write to share their commit (ack_linger),
    // the backpressure bound on SENDING rows (max_unsent, max_hold), crash
    // points and the written counter's name; defaults in group_writer.h.
    GroupWriterOptions group_commit;
    // Runs inside the transaction that closes a row (SENT, or FAILED by the
    // consumer's reject), under a savepoint: mark the business record
    // confirmed with it. RowClosed's contract is in outbox_table.h.
    RowClosed on_closed;
    const Clock* clock = nullptr;        // null: the system clock
    MetricsRegistry* metrics = nullptr;  // null: a registry of the producer's own
  };

  // Builds the producer on `file` (which outlives it) with its own AMQP
  // connections and starts its relay and ack listener. INVALID_ARGUMENT or
  // FAILED_PRECONDITION (no signing chosen) naming the setting.
  static absl::StatusOr<std::unique_ptr<Producer>> Start(SqliteFile& file, Options options);
  // The process's producer from its one options block (config.h): opens
  // config.db, brought to config.schema, starts the producer on it, and the
  // recovery role on the same file unless config.recovery_in_process is
  // false. The errors of OpenSqliteFile, Start and Recovery::Start.
  static absl::StatusOr<std::unique_ptr<Producer>> Start(const Config& config);
  // The same over broker links of the caller's (a test's fakes), not
  // started: StartWorkers(), or drive it with RelayStep() and AckStep().
  static absl::StatusOr<std::unique_ptr<Producer>> Create(
      SqliteFile& file, Options options, std::unique_ptr<MessagePublisher> publisher,
      std::unique_ptr<MessageConsumer> replies);
  ~Producer();  // Stop()

  // The relay's and the ack listener's threads (Start calls it). The group
  // writer's thread runs from Create on: Write needs it.
  void StartWorkers();
  // Stops recovery when it runs here (its round finished, the lease given
  // up), then the ack listener (its batch in hand recorded), then the group
  // writer (what is queued is committed and handed to the relay; later
  // writes are UNAVAILABLE), then the relay (what is queued is published if
  // the broker is there, else left to recovery).
  void Stop();
  // One turn of the relay (it waits up to a second when nothing is
  // queued), and one of the ack listener. Tests call them.
  bool RelayStep() { return relay_.Step(); }
  bool AckStep() { return acks_.Step(); }

  // `business` writes the adopter's rows, then the outbox row for `spec`
  // (its topic and reply_to filled from the options when empty, its
  // message_id, the consumer's dedup key, a new time-ordered UUID) is
  // inserted, both in the next group's transaction. An error `business`
  // returns, or a SQLite::Exception it throws, rolls back this write alone
  // and comes back here; nothing of it is written. `business` runs on the
  // writer's thread under a savepoint: read its contract at BusinessWrite
  // (shared/sqlite/internal/group_writer.h). Once committed the message is handed to
  // the relay; returns its id. Any thread may call it (and Get, CountRows,
  // WaitUntilClosed); callers at the same time share one commit.
  absl::StatusOr<std::string> Write(MessageSpec spec, const BusinessWrite& business);
  // The same without waiting: `done` runs once, with the committed row or
  // the write's error, on the writer's thread right after the group's
  // commit (keep it short: the group's other callers wait behind it), or at
  // once here when the producer is stopping (UNAVAILABLE). What `business`
  // and `done` capture must live until `done` has run.
  void WriteAsync(MessageSpec spec, BusinessWrite business, GroupWriter::WriteDone done);

  // "Are my rows closed?", on the producer's own connection (SqliteOutbox).
  absl::StatusOr<OutboxMessage> Get(const std::string& message_id) {
    return outbox_.Get(message_id);
  }
  absl::StatusOr<OutboxRowCounts> CountRows() { return outbox_.CountRows(); }
  // Until no row is SENDING; DEADLINE_EXCEEDED first. Rows close only while
  // the ack listener runs: call it before Stop().
  absl::StatusOr<OutboxRowCounts> WaitUntilClosed(absl::Time deadline,
                                                  absl::Duration poll = absl::Milliseconds(100)) {
    return outbox_.WaitUntilClosed(deadline, poll);
  }
  // The same, and CANCELLED once `stop` returns true (asked every 100 ms):
  // WaitUntilClosed(deadline, outbox::ShutdownRequested) ends at SIGTERM.
  absl::StatusOr<OutboxRowCounts> WaitUntilClosed(absl::Time deadline,
                                                  const std::function<bool()>& stop) {
    return outbox_.WaitUntilClosed(deadline, absl::Milliseconds(100), stop);
  }

  const Options& options() const { return options_; }
  // What Start(config) opened and runs beside the producer: the file, and
  // recovery (null when config.recovery_in_process is false, or without a
  // config).
  SqliteFile* file() { return own_file_.get(); }
  Recovery* recovery() { return recovery_.get(); }
  int64_t confirmed() const { return relay_.confirmed(); }       // messages the broker took
  int64_t publish_failed() const { return relay_.failed(); }     // publishes that failed
  int64_t acknowledged() const { return acks_.acknowledged(); }  // rows closed SENT
  int64_t replies() const { return acks_.replies(); }
  int64_t dead_lettered_replies() const { return acks_.dead_lettered(); }
  int64_t group_commits() const { return writer_.groups_committed(); }  // write transactions
  int64_t written() const { return writer_.written(); }                 // messages committed

 private:
  Producer(SqliteFile& file, Options options, std::unique_ptr<MessagePublisher> publisher,
           std::unique_ptr<MessageConsumer> replies);

  std::unique_ptr<SqliteFile> own_file_;  // first: it outlives what writes it
  const Options options_;
  std::unique_ptr<MetricsRegistry> own_metrics_;
  std::unique_ptr<MessagePublisher> publisher_;
  std::unique_ptr<MessageConsumer> replies_;
  SigningPublisher signing_publisher_;
  SqliteOutbox outbox_;  // the relay's repository
  Relay relay_;
  GroupWriter writer_;  // the ack listener's repository
  AckListener acks_;
  TimeOrderedUuidGenerator ids_;        // message ids the caller left empty
  std::unique_ptr<Recovery> recovery_;  // last: stopped and gone first
};

}  // namespace outbox

#pragma once

// The producer role on PostgreSQL, the counterpart of outbox::Producer
// (shared/roles/producer.h) with the same broker side: a PgGroupWriter
// whose thread commits the writes of many callers in one transaction per
// group on a connection of its own, a Relay on a broker connection of its
// own that publishes each message right after its commit (and leaves a
// message held past its first retry to recovery), and an AckListener on
// another that closes rows as the consumer's replies come in, through a
// PgOutbox on a second database connection. Optionally the recovery role
// runs in the same process on a PgRecoveryStore (a third connection), under
// the lease, so that one process is a complete producer.
//
//   OUTBOX_ASSIGN_OR_RETURN(auto producer, outbox::PgProducer::Start(config, &ShopSchema()));
//   OUTBOX_ASSIGN_OR_RETURN(std::string id, producer->Write(spec, write_my_rows));
//   producer->WaitUntilClosed(deadline);  // every row answered
//
// from the process's Config (config.h), its db a postgresql:// URI, as
// Producer::Start(config) on SQLite; or PgProducer::Start(conninfo, options)
// on a database that holds the outbox tables already (UpgradePgSchema with
// PgOutboxSchema()). Its calls are Producer's, with the same names, results
// and defaults; what differs is the store: the business step gets a
// PgConnection (PgBusinessWrite), the group commit's options are
// pg_group_commit, the closing step is a PgRowClosed.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "shared/base/internal/ids.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/ack_listener.h"
#include "shared/outbox/internal/relay.h"
#include "shared/outbox/message.h"
#include "shared/outbox/signing.h"
#include "shared/outbox/transport.h"
#include "shared/postgres/internal/pg_group_writer.h"
#include "shared/postgres/internal/pg_outbox.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"
#include "shared/roles/config.h"
#include "shared/roles/producer.h"
#include "shared/roles/recovery.h"

namespace outbox {

class PgProducer {
 public:
  // Producer's options, read as Producer reads them (amqp, queue,
  // reply_queue, signing, retry, name, window, reply_prefetch, decode_reply,
  // biz_key_label, the crash points, clock, metrics), except its
  // group_commit and on_closed, which are SQLite's: on PostgreSQL they are
  // pg_group_commit and pg_on_closed (on_closed set is refused).
  struct Options : Producer::Options {
    PgGroupWriterOptions pg_group_commit;  // defaults in pg_group_writer.h
    // Runs inside the transaction that closes a row (SENT, or FAILED by the
    // consumer's reject, or by recovery), under a savepoint (PgRowClosed).
    PgRowClosed pg_on_closed;
    // Start also runs the recovery role here, on a PgRecoveryStore of its
    // own connection; its lease lets many producer processes share one
    // database, one of them re-publishing at a time. As Config's: false,
    // recovery runs elsewhere (StartPgRecovery). Create never runs it.
    bool recovery_in_process = true;
    // Recovery's other settings (recovery.recovery: the loop's, alerts, the
    // sweep). amqp, signing, queue, reply_queue, clock, metrics and
    // recovery.recovery.retry are taken from the options above; db,
    // producer_db and on_closed are not read; recovery.recovery.instance_id
    // "": "<queue>-<host name>-<process id>".
    Recovery::Options recovery;
  };

  // Connects to `conninfo` (twice: the writer's connection and the ack
  // listener's; a third for recovery), makes the producer's own AMQP
  // connections and starts its relay, ack listener and, unless
  // options.recovery_in_process is false, recovery. INVALID_ARGUMENT or
  // FAILED_PRECONDITION (no signing chosen) naming the setting;
  // PgSession::Open's errors.
  static absl::StatusOr<std::unique_ptr<PgProducer>> Start(absl::string_view conninfo,
                                                           Options options);
  // The process's producer on PostgreSQL from its one options block
  // (config.h), as Producer::Start(config) is on SQLite: config.db is the
  // database's libpq URI (IsPgConninfo), brought to the library's
  // PgOutboxSchema() and then to `schema`, the adopter's tables (null:
  // none); the options are ProducerOptionsOf(config), with the group commit
  // of PgGroupWriterOptions' defaults; recovery runs in the same process
  // with config.recovery's settings unless config.recovery_in_process is
  // false. `on_closed` is the closing step (config.on_closed, SQLite's, set
  // is refused). INVALID_ARGUMENT for a config.db that is not a libpq URI;
  // then Start's errors and the schemas'.
  static absl::StatusOr<std::unique_ptr<PgProducer>> Start(const Config& config,
                                                           const PgSchema* schema = nullptr,
                                                           PgRowClosed on_closed = nullptr);
  // The same over sessions and broker links of the caller's (a test's
  // fakes; `writer` and `acks` may be one session), not started:
  // StartWorkers(), or drive it with RelayStep() and AckStep(). No recovery.
  static absl::StatusOr<std::unique_ptr<PgProducer>> Create(
      PgSession& writer, PgSession& acks, Options options,
      std::unique_ptr<MessagePublisher> publisher, std::unique_ptr<MessageConsumer> replies);
  ~PgProducer();  // Stop()

  // The relay's and the ack listener's threads (Start calls it). The group
  // writer's thread runs from Create on: Write needs it.
  void StartWorkers();
  // Producer::Stop's order: recovery (its round finished, the lease given
  // up), the ack listener, the group writer (what is queued is committed
  // and handed to the relay; later writes are UNAVAILABLE), then the relay.
  void Stop();
  bool RelayStep() { return relay_.Step(); }
  bool AckStep() { return acks_.Step(); }

  // `business` writes the adopter's rows on the writer's connection, then
  // the outbox row for `spec` (its topic and reply_to filled from the
  // options when empty, its message_id a new time-ordered UUID when empty)
  // is inserted, both in the next group's transaction; read `business`'s
  // contract at PgBusinessWrite. Once committed the message is handed to the
  // relay; returns its id. Any thread may call it; callers at the same time
  // share one commit.
  absl::StatusOr<std::string> Write(MessageSpec spec, PgBusinessWrite business);
  // The same without waiting: `done` runs once, on the writer's thread
  // right after the group's commit (keep it short), or at once here when
  // the producer is stopping (UNAVAILABLE).
  void WriteAsync(MessageSpec spec, PgBusinessWrite business, PgGroupWriter::WriteDone done);

  // "Are my rows closed?", on the ack listener's connection.
  absl::StatusOr<OutboxMessage> Get(const std::string& message_id) {
    return outbox_.Get(message_id);
  }

  // The rows by status, on the ack listener's connection.
  absl::StatusOr<OutboxRowCounts> CountRows();
  // Until no row is SENDING, then the counts; DEADLINE_EXCEEDED first. Rows
  // close only while the ack listener runs: call it before Stop().
  absl::StatusOr<OutboxRowCounts> WaitUntilClosed(absl::Time deadline,
                                                  absl::Duration poll = absl::Milliseconds(100));
  // The same, and CANCELLED once `stop` returns true (asked every 100 ms):
  // WaitUntilClosed(deadline, outbox::ShutdownRequested) ends at SIGTERM.
  absl::StatusOr<OutboxRowCounts> WaitUntilClosed(absl::Time deadline,
                                                  const std::function<bool()>& stop);

  const Options& options() const { return options_; }
  Recovery* recovery() { return recovery_.get(); }               // null unless recovery_in_process
  int64_t confirmed() const { return relay_.confirmed(); }       // messages the broker took
  int64_t publish_failed() const { return relay_.failed(); }     // publishes that failed
  int64_t acknowledged() const { return acks_.acknowledged(); }  // rows closed SENT
  int64_t replies() const { return acks_.replies(); }
  int64_t dead_lettered_replies() const { return acks_.dead_lettered(); }
  int64_t group_commits() const { return writer_.groups_committed(); }  // write transactions
  int64_t written() const { return writer_.written(); }                 // messages committed

 private:
  PgProducer(PgSession& writer, PgSession& acks, Options options,
             std::unique_ptr<MessagePublisher> publisher, std::unique_ptr<MessageConsumer> replies);

  // What Start opened: first, they outlive what uses them.
  std::unique_ptr<PgSession> own_writer_session_;
  std::unique_ptr<PgSession> own_acks_session_;
  std::unique_ptr<PgSession> own_recovery_session_;
  const Options options_;
  PgSession& acks_session_;
  std::unique_ptr<MetricsRegistry> own_metrics_;
  std::unique_ptr<MessagePublisher> publisher_;
  std::unique_ptr<MessageConsumer> replies_;
  SigningPublisher signing_publisher_;
  PgOutbox writer_outbox_;  // the writer's retry stamp, on the writer's connection
  PgOutbox outbox_;         // the relay's and the ack listener's repository
  Relay relay_;
  PgGroupWriter writer_;
  PgAckRepository ack_repository_;  // outbox_, each batch applied told to writer_
  AckListener acks_;
  TimeOrderedUuidGenerator ids_;        // message ids the caller left empty
  std::unique_ptr<Recovery> recovery_;  // last: stopped and gone first
};

}  // namespace outbox

#pragma once

// The recovery role in one call: opens the producer's file as its producer
// made it (RecoveryStore::OpenWhenCreated: waits for it, never creates it),
// and runs a RecoveryLoop on it with a publisher of its own that signs what
// it re-publishes with the process's Signing (which must be chosen: keys,
// or Signing::Unsigned()), and an Alerter (logs only without an
// alertmanager_url). It also gives the operator's tools: operator_store()
// (counts, listings, re-drives, history, audit; OperatorRepository, on the
// producer's file or the store given to Start) and dead_letters() (peek at and
// re-drive the dead-letter queues), and its housekeeping removes dead
// letters whose message was booked since (dead_letter_sweep.h).
//
//   outbox::Recovery::Options options;
//   options.amqp = url;
//   options.db = "shop.db";
//   options.producer_db.schema = &ShopSchema();
//   options.queue = "shop.orders";  // the producer's; its reply queue is the default
//   options.signing = signing;
//   options.recovery.instance_id = "shop-recovery-1";
//   options.recovery.retry = Retry();  // the producer's policy
//   OUTBOX_ASSIGN_OR_RETURN(auto recovery, outbox::Recovery::Start(options));
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/amqp/amqp_url.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/base/clock.h"
#include "shared/observability/internal/alerts.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/dead_letter_sweep.h"
#include "shared/outbox/internal/dead_letters.h"
#include "shared/outbox/internal/operator_repository.h"
#include "shared/outbox/internal/recovery_loop.h"
#include "shared/outbox/internal/recovery_options.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/signing.h"
#include "shared/outbox/transport.h"
#include "shared/sqlite/internal/db_options.h"
#include "shared/sqlite/internal/operator_store.h"
#include "shared/sqlite/internal/recovery_store.h"

namespace outbox {

struct Config;  // config.h

class Recovery {
 public:
  struct Options {
    AmqpUrl amqp;  // the broker (Start); Create takes the links instead
    // Required (Start): the producer's file, opened once its producer has
    // created it; recovery never creates it. A PostgreSQL database's URI is
    // StartPgRecovery's (shared/postgres/pg_recovery.h), which Start refuses.
    std::string db;
    // Required (Start): its schema, and the names its errors use.
    ProducerDb producer_db;
    DbOptions db_options;  // durability and the busy timeout of recovery's connections
    // How long Start waits for the file to be created and upgraded.
    absl::Duration wait_for_db = absl::Minutes(2);
    // Told once why Start waits (the file missing or older); none: nothing.
    std::function<void(const absl::Status&)> on_wait;
    // The producer's queue. It fills what `recovery` leaves empty:
    // watched_queues {queue}, reply_queues {reply_queue},
    // dead_letter_sources {queue, reply_queue}.
    std::string queue;
    // The producer's reply queue. "": DefaultReplyQueue(queue), "<queue>.replies".
    std::string reply_queue;
    // Required: Signing::With(keys), Signing::FromKeyFile(path), or
    // Signing::Unsigned() by name; the consumer checks what recovery
    // re-publishes as it checks the producer's. Unchosen, Start and Create fail.
    Signing signing;
    // The loop's settings (recovery_options.h): instance_id is required,
    // retry must be the producer's policy.
    RecoveryOptions recovery;
    // Dead letters looked at per queue and housekeeping pass by the sweep
    // (from the head; those kept go back in their place). 0: no sweep.
    int sweep_dead_letters = 100;
    // Each dead-letter source's re-drive exchange, by queue; unnamed: "", the default exchange.
    std::map<std::string, std::string> redrive_exchanges;
    // What the publisher declares (Start); re-publishing goes through its exchange.
    Topology topology;
    AlerterOptions alerts;          // no alertmanager_url: alerts are logged only
    std::string name = "recovery";  // the connection "<name>-<instance_id>"
    // The dead-letter connection (Start); "": "<name>-dead-letters-<instance_id>".
    std::string dead_letters_name;
    // false: Start runs nothing (no lease, no re-publishing) until StartWorkers().
    bool start_workers = true;
    // Runs inside the claim that turns a row FAILED (attempts spent, or too
    // old), under a savepoint (RowClosed, outbox_table.h); Start's store only.
    RowClosed on_closed;
    const Clock* clock = nullptr;        // null: the system clock
    MetricsRegistry* metrics = nullptr;  // null: a registry of recovery's own
  };

  // Opens the store, connects and starts the loop (unless
  // options.start_workers is false). INVALID_ARGUMENT or
  // FAILED_PRECONDITION (no signing chosen) naming the setting; the store's
  // error when the file is not there in time.
  static absl::StatusOr<std::unique_ptr<Recovery>> Start(Options options);
  // The same on a store of the caller's (PgRecoveryStore on PostgreSQL,
  // its instance and on_closed set by the caller; options.db,
  // options.producer_db and options.on_closed are not read): the publisher,
  // the alerter and the dead-letter browser made as above.
  // `operator_store`, the operator's verbs on the same database (PgOperatorStore),
  // is operator_store() then, its metrics registered, and records the
  // sweep's removals; none: no operator_store(). StartPgRecovery
  // (shared/postgres/pg_recovery.h) makes both on PostgreSQL.
  // INVALID_ARGUMENT naming the setting.
  static absl::StatusOr<std::unique_ptr<Recovery>> Start(
      Options options, std::unique_ptr<RecoveryRepository> store,
      std::unique_ptr<OperatorRepository> operator_store = nullptr);
  // The same from the process's one options block (config.h): Start(RecoveryOptionsOf(config)).
  static absl::StatusOr<std::unique_ptr<Recovery>> Start(const Config& config);
  // The same over a store, a publisher, an alert sink and (optionally) a
  // browser of the dead-letter queues of the caller's (a test's fakes), not
  // started: StartWorkers(), or drive it with Step(). Without a browser
  // there is no dead_letters() and no sweep.
  static absl::StatusOr<std::unique_ptr<Recovery>> Create(
      Options options, std::unique_ptr<RecoveryRepository> store,
      std::unique_ptr<MessagePublisher> publisher, std::unique_ptr<AlertSink> alerts,
      std::unique_ptr<QueueBrowser> dead_letter_browser = nullptr);
  ~Recovery();  // Stop()

  void StartWorkers();
  // Finishes the round in hand, gives the lease up, then delivers what
  // alerts are queued (briefly).
  void Stop();
  bool Step() { return loop_.Step(); }  // one turn; tests call it

  const Options& options() const { return options_; }
  bool lease_held() const { return loop_.lease_held(); }
  int64_t republished() const { return loop_.republished(); }
  int64_t publish_failures() const { return loop_.publish_failures(); }
  int64_t failed() const { return loop_.failed(); }
  int64_t deferred() const { return loop_.deferred(); }

  // The loop itself (its counters, lease and hold, as the operator's tools read them).
  const RecoveryLoop& loop() const { return loop_; }
  // The alerter Start made (its delivery counters); null when Create was
  // given another alert sink.
  const Alerter* alerter() const { return alerter_; }
  // The store the loop works on, the producer's file (recovery_store.h);
  // null when Create or Start was given another store.
  RecoveryStore* store() { return sqlite_store_; }
  // The store the loop works on, whichever it is.
  RecoveryRepository& repository() { return *store_; }
  // The operator's view of the same database, each change audited
  // (operator_repository.h): OperatorStore on the file Start opened, or the
  // one given to Start; null when Create made this.
  OperatorRepository* operator_store() { return operator_store_.get(); }
  // The dead-letter queues of options.recovery.dead_letter_sources (by
  // default the producer's queue and reply queue), each re-driven through
  // its options.redrive_exchanges; null when Create was given no browser.
  DeadLetters* dead_letters() { return dead_letters_.get(); }

 private:
  Recovery(Options options, std::unique_ptr<RecoveryRepository> store,
           std::unique_ptr<MessagePublisher> publisher, std::unique_ptr<AlertSink> alerts,
           std::unique_ptr<QueueBrowser> dead_letter_browser);
  // Start's links on `store`, already checked; `sqlite_store` is `store`
  // when it is the producer's file (then the operator's view is made on it,
  // and `operator_store` is null).
  static absl::StatusOr<std::unique_ptr<Recovery>> StartOn(
      Options options, std::unique_ptr<RecoveryRepository> store, RecoveryStore* sqlite_store,
      std::unique_ptr<OperatorRepository> operator_store);

  const Options options_;
  std::unique_ptr<MetricsRegistry> own_metrics_;
  std::unique_ptr<RecoveryRepository> store_;
  // On store_'s database, when Start opened it or was given it.
  std::unique_ptr<OperatorRepository> operator_store_;
  std::unique_ptr<MessagePublisher> publisher_;
  std::unique_ptr<AlertSink> alerts_;
  SigningPublisher signing_publisher_;
  RecoveryLoop loop_;
  std::unique_ptr<QueueBrowser> dead_letter_browser_;
  std::unique_ptr<DeadLetters> dead_letters_;
  std::unique_ptr<DeadLetterSweep> sweep_;
  RecoveryStore* sqlite_store_ = nullptr;  // store_, when Start opened it
  Alerter* alerter_ = nullptr;             // alerts_, when Start made it: stopped after the loop
  bool stopped_ = false;
};

}  // namespace outbox

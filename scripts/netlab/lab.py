"""The network lab's orchestration: builds the lab (through the Bash plumbing,
scripts/lib/netlab_ns.sh), runs each fault under load, collects the client's
ledger and the databases' state, has judge.py judge them and prints one
table. Started by scripts/netlab.sh (`run`), which it replaces in the same
process, so the namespaces' owner pid (LAB_PREFIX=oblab-<pid>) is this one.

    /usr/bin/python3 scripts/netlab/lab.py run [FAULT[,FAULT...]|all]

Faults, settings and the table's columns: scripts/netlab.sh's header and
docs/testing.md#network-faults.
"""

import os
import random
import secrets
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import shutil

import judge

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = os.path.join(ROOT, "scripts", "lib", "netlab_ns.sh")
BROKERS = ["b1", "b2", "b3"]
HOSTS = BROKERS + ["pay", "acc", "rec1", "rec2", "load"]
PG_HOSTS = ["pg1", "pg2"]
FLAP_HOSTS = ["b1", "b2", "b3", "pay", "acc", "rec1", "rec2"]
FLAP_MIN, FLAP_MAX = 5, 10
WARMUP = 2
METRICS_PORT = 9100
FAULTS = ["pay-cut", "acc-cut", "recovery-cut", "broker-follower", "broker-leader", "pay-oneway",
          "flapping", "pay-slow", "recovery-pause", "skew-ahead", "skew-behind"]
PG_FAULTS = ["pay-db-cut", "pg-standby-cut"]  # STORE=postgres only
PG_PORT = 5432
DB_HEAL_POLL = 0.1
SERVICES = {"pay": ("payment_service", 50051), "acc": ("accounting_service", 50052),
            "rec1": ("recovery_service", 50053), "rec2": ("recovery_service", 50053)}
# The claim audit of Lab.add_claim_audit on PostgreSQL: the lease row as each claim's own
# transaction saw it.
PG_CLAIM_AUDIT = """
  CREATE TABLE IF NOT EXISTS netlab_claims (message_id TEXT, attempts INTEGER, holder TEXT,
                                            expires_at BIGINT);
  CREATE INDEX IF NOT EXISTS netlab_claims_message ON netlab_claims (message_id, attempts);
  CREATE OR REPLACE FUNCTION netlab_claim() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    INSERT INTO netlab_claims
      SELECT new.message_id, new.attempts, coalesce(max(holder), ''), coalesce(max(expires_at), 0)
      FROM recovery_lease;
    RETURN new;
  END $$;
  DROP TRIGGER IF EXISTS netlab_claim ON outbox;
  CREATE TRIGGER netlab_claim AFTER UPDATE OF attempts ON outbox FOR EACH ROW
    WHEN (new.attempts > old.attempts) EXECUTE FUNCTION netlab_claim();
"""


def log(message):
    print(f"netlab: {time.strftime('%H:%M:%S', time.gmtime())} {message}", file=sys.stderr, flush=True)


def now_ms():
    return int(time.time() * 1000)


class LabError(Exception):
    pass


class Settings:
    """The environment's settings (scripts/netlab.sh's header)."""

    def __init__(self, env):
        self.rate = int(env.get("RATE", "300"))
        self.fault_secs = int(env.get("FAULT_SECS", "30"))
        self.pre = int(env.get("PRE", "10"))
        self.post = int(env.get("POST", "10"))
        self.lease_ttl = int(env.get("LEASE_TTL", "10"))
        self.heal_timeout = int(env.get("HEAL_TIMEOUT", "300"))
        self.skew_secs = int(env.get("SKEW_SECS", "30"))
        self.flap_secs = int(env.get("FLAP_SECS", "60"))
        self.slow_rate = env.get("SLOW_RATE", "1mbit")
        self.build_dir = env.get("BUILD_DIR", "build")
        self.partition_handling = env.get("PARTITION_HANDLING", "autoheal")
        self.metadata = env.get("METADATA", "mnesia")
        self.repair = env.get("REPAIR_BROKERS", "auto")
        self.keep = env.get("KEEP", "0") == "1"
        self.store = env.get("STORE", "sqlite")
        self.pg_options = env.get("PG_OPTIONS", "")

    @property
    def pg(self):
        return self.store == "postgres"


class Lab:
    def __init__(self, settings):
        self.s = settings
        self.prefix = os.environ.get("LAB_PREFIX") or f"oblab-{os.getpid()}"
        self.bin = os.path.abspath(os.path.join(ROOT, settings.build_dir, "bin")
                                   if not os.path.isabs(settings.build_dir)
                                   else os.path.join(settings.build_dir, "bin"))
        self.work = None
        self.svc = {}
        self.bench = None
        self.flapper = None
        self.flap_stop = threading.Event()
        self.broker = None
        self.repair = False
        self.hosts = HOSTS + (PG_HOSTS if settings.pg else [])
        self.pg_bin = None  # the nodes' binaries, read from WORK/pg1/node.env

    # ------------------------------------------------------------ plumbing

    def env(self):
        e = dict(os.environ)
        e.update(LAB_PREFIX=self.prefix, WORK=self.work or "", BIN=self.bin,
                 METADATA=self.s.metadata, PARTITION_HANDLING=self.s.partition_handling,
                 LEASE_TTL=str(self.s.lease_ttl), STORE=self.s.store, PG_OPTIONS=self.s.pg_options)
        return e

    def ns(self, *args, timeout=None, check=True):
        """One plumbing command; its stdout (stripped). Raises LabError if CHECK and it fails."""
        try:
            p = subprocess.run([NS, *args], env=self.env(), stdout=subprocess.PIPE,
                               stderr=None if check else subprocess.DEVNULL, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            if check:
                raise LabError(f"netlab_ns.sh {' '.join(args)} did not finish in {timeout} s")
            return None
        if check and p.returncode != 0:
            raise LabError(f"netlab_ns.sh {' '.join(args)} exited {p.returncode}")
        return p.stdout.strip() if p.returncode == 0 else None

    def rmq(self, broker, secs, *args):
        """rabbitmqctl against a node, bounded in time; None if it failed."""
        return self.ns("rmq", broker, str(secs), *args, timeout=secs + 30, check=False)

    def ip(self, host):
        return self.ns("ip", host)

    def cut(self, host, *peers):
        self.ns("cut", host, *peers)

    def deafen(self, host, *peers):
        self.ns("deafen", host, *peers)

    def heal_all(self):
        self.ns("heal-all")

    def in_host(self, host, *cmd, timeout=None):
        return self.ns("in-host", host, *cmd, timeout=timeout, check=False)

    # ------------------------------------------------------------ services

    def start_service(self, inst, skew=None):
        args = [NS, "start-service", inst] + ([skew] if skew else [])
        self.svc[inst] = subprocess.Popen(args, env=self.env(), stdin=subprocess.DEVNULL)
        binary, port = SERVICES[inst]
        addr = f"{self.addrs[inst]}:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.svc[inst].poll() is not None:
                raise LabError(f"{binary} on {inst} exited (see {self.work}/{inst}.log)")
            if self.in_host("load", f"{self.bin}/outboxctl", "health", addr, timeout=10) is not None:
                return
            time.sleep(0.2)
        raise LabError(f"{addr} did not become SERVING")

    def stop_service(self, inst):
        p = self.svc.pop(inst, None)
        if p is None:
            return
        for sig in (signal.SIGCONT, signal.SIGTERM):
            try:
                p.send_signal(sig)
            except ProcessLookupError:
                pass
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def restart_recovery(self, inst, skew=None):
        """Stops the instance by pid (SIGTERM gives up its lease) and starts it again."""
        self.stop_service(inst)
        log(f"restarting {inst}" + (f" with its clock at {skew}" if skew else ""))
        self.start_service(inst, skew)

    def metric(self, host, name):
        text = self.in_host("load", "curl", "-s", "--max-time", "5",
                            f"http://{self.addrs[host]}:{METRICS_PORT}/metrics", timeout=15)
        return judge.metric_sum(text or "", name)

    def deliveries(self):
        """PAY_QUEUE messages accounting has taken so far (vouchers booked + duplicates answered)."""
        return self.metric("acc", "outbox_vouchers_created_total") + \
            self.metric("acc", "outbox_duplicates_total")

    # ------------------------------------------------------------ the databases

    def psql(self, db, sql, timeout=30):
        """psql -At on the primary (its socket in WORK/pg1: no cut reaches it); its output,
        or None if it failed."""
        env = dict(os.environ, PGPASSFILE=f"{self.work}/pg1/pgpass", PGCONNECT_TIMEOUT="10")
        if self.pg_bin is None:
            with open(f"{self.work}/pg1/node.env") as f:  # scripts/postgres_node.sh's
                self.pg_bin = next(line.split("=", 1)[1].strip() for line in f
                                   if line.startswith("PG_BIN="))
        try:
            p = subprocess.run([f"{self.pg_bin}/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                                "-h", f"{self.work}/pg1", "-p", str(PG_PORT), "-U", "outbox",
                                "-d", db, "-c", sql], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        if p.returncode != 0:
            log(f"psql on {db}: {p.stderr.strip()}")
            return None
        return p.stdout

    def pdb(self, sql):
        """One value from payment's database (payment.db opened read-only, or the database
        outbox on the primary); None if it could not be read."""
        if self.s.pg:
            out = self.psql("outbox", sql)
            if out is None:
                return None
            first = out.splitlines()[0] if out.strip() else ""
            return int(first) if first.lstrip("-").isdigit() else (first or None)
        try:
            db = sqlite3.connect(f"file:{self.work}/payment.db?mode=ro", uri=True, timeout=5)
            try:
                row = db.execute(sql).fetchone()
                return row[0] if row else None
            finally:
                db.close()
        except sqlite3.Error:
            return None

    def lease_holder(self, default=None):
        now = ("(extract(epoch FROM clock_timestamp()) * 1000)::bigint" if self.s.pg
               else "CAST(strftime('%s','now') AS INTEGER) * 1000")
        h = self.pdb(f"SELECT holder FROM recovery_lease WHERE expires_at > {now} LIMIT 1")
        return h or default

    def add_claim_audit(self):
        """A table and trigger in payment.db (the lab's, never a product file) that record,
        inside each recovery claim's own transaction, the lease row as that transaction saw
        it. A claim is the one update that raises attempts. The connection checkpoints
        nothing itself (scripts/lib/sqlite.sh says why). On PostgreSQL the same in
        PL/pgSQL, in the database outbox."""
        if self.s.pg:
            if self.psql("outbox", PG_CLAIM_AUDIT) is None:
                raise LabError("cannot add the claim audit to the database outbox")
            return
        db = sqlite3.connect(f"{self.work}/payment.db", timeout=10, isolation_level=None)
        try:
            db.execute("PRAGMA wal_autocheckpoint=0")
            db.executescript("""
              BEGIN;
              CREATE TABLE IF NOT EXISTS netlab_claims (message_id TEXT, attempts INTEGER, holder TEXT, expires_at INTEGER);
              CREATE INDEX IF NOT EXISTS netlab_claims_message ON netlab_claims (message_id, attempts);
              CREATE TRIGGER IF NOT EXISTS netlab_claim AFTER UPDATE OF attempts ON outbox
              WHEN new.attempts > old.attempts BEGIN
                INSERT INTO netlab_claims
                  SELECT new.message_id, new.attempts, coalesce(max(holder), ''), coalesce(max(expires_at), 0)
                  FROM recovery_lease;
              END;
              COMMIT;""")
        finally:
            db.close()

    def snapshot(self, stem):
        """The two databases as judge.judge_ledger reads them: the files themselves on
        SQLite; on PostgreSQL, the tables it reads copied through psql into two SQLite
        files, WORK/STEM.outbox.db and WORK/STEM.accounting.db."""
        if not self.s.pg:
            return f"{self.work}/payment.db", f"{self.work}/accounting.db"
        paths = []
        for db, tables in judge.PG_TABLES:
            copied = []
            for table, columns in tables:
                names = ", ".join(c.split()[0] for c in columns)
                out = self.psql(db, f"COPY (SELECT {names} FROM {table}) TO STDOUT WITH (FORMAT csv)",
                                timeout=120)
                if out is None:
                    raise LabError(f"cannot read {table} from the database {db}")
                copied.append((table, columns, out))
            path = f"{self.work}/{stem}.{db}.db"
            judge.snapshot_db(path, copied)
            paths.append(path)
        return tuple(paths)

    def commits(self):
        """Payments committed on the primary so far (outbox rows), or None."""
        n = self.pdb("SELECT count(*) FROM outbox")
        return n if isinstance(n, int) else None

    def watch_db_heal(self, since_ms, base, stop, result):
        """From the fault's end: when the primary first shows a payment committed after it
        (its outbox rows counted every DB_HEAL_POLL s), in seconds with one decimal, into
        result['secs']; BASE is the count at the fault's end."""
        while not stop.is_set():
            n = self.commits()
            if base is not None and n is not None and n > base:
                result["secs"] = "%.1f" % ((now_ms() - since_ms) / 1000)
                return
            if base is None:
                base = n
            stop.wait(DB_HEAL_POLL)

    def files_integrity(self, out_path):
        """"ok" when PRAGMA integrity_check passes on both files (answers to OUT_PATH), else "BAD"."""
        verdict = "ok"
        with open(out_path, "w") as out:
            for f in ("payment.db", "accounting.db"):
                try:
                    db = sqlite3.connect(f"file:{self.work}/{f}?mode=ro", uri=True, timeout=10)
                    try:
                        answer = "\n".join(r[0] for r in db.execute("PRAGMA integrity_check"))
                    finally:
                        db.close()
                except sqlite3.Error as e:
                    answer = str(e)
                out.write(f"{f}: {answer}\n")
                if answer != "ok":
                    verdict = "BAD"
        return verdict

    # ------------------------------------------------------------ the cluster

    def view(self, b):
        return judge.node_view(self.rmq(b, 15, "eval",
            "{length(rabbit_nodes:all_running()), rabbit_node_monitor:partitions()}.") or "")

    def cluster_whole(self, secs):
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            if judge.is_whole(self.view("b1")):
                return True
            time.sleep(1)
        return False

    def queue_leader(self, queue):
        for b in BROKERS:
            leader = judge.queue_leader(self.rmq(b, 20, "list_queues", "--no-table-headers",
                                                 "name", "leader") or "", queue)
            if leader:
                return leader
        return None

    def await_quorum_whole(self, secs=120):
        """Waits for every quorum queue to have its 3 members online; "3/3" or the worst "n/3".
        Any node's answer will do: after autoheal restarted nodes, one node's list_queues has
        hung on a queue for minutes while the others answered at once."""
        deadline = time.monotonic() + secs
        best = 0
        while time.monotonic() < deadline:
            for b in BROKERS:
                n = judge.fewest_online(self.rmq(b, 20, "list_queues", "name", "type", "online",
                                                 "--formatter", "json") or "")
                if n is not None:
                    best = max(best, n)
                if best == 3:
                    return "3/3"
            time.sleep(2)
        return f"{best}/3"

    def partitioned_node(self):
        """The node that sees the fewest running nodes among those whose view lists a partition."""
        worst, fewest = None, 4
        for b in BROKERS:
            v = self.view(b)
            if v and v[1] and v[0] < fewest:
                worst, fewest = b, v[0]
        return worst

    def stuck_node(self):
        for b in BROKERS:
            if self.rmq(b, 15, "eval", "rabbit:is_running().") == "false":
                return b
        return None

    def offline_member_node(self):
        for b in BROKERS:
            out = self.rmq(b, 20, "list_queues", "name", "type", "members", "online",
                           "--formatter", "json")
            if out is not None:
                return judge.most_offline_node(out)
        return None

    def restart_node(self, fault, b, why, repaired):
        """What an operator does when RabbitMQ leaves a node broken after the network healed
        (docs/deployment.md#clustering): the whole node, not only its application."""
        log(f"{fault}: {why}; restarting it")
        if self.ns("restart-broker", b, timeout=400, check=False) is None:
            log(f"{fault}: {b} did not restart (logs in {self.work}/{b}/log)")
        repaired.append(b)

    def settle_cluster(self, fault, was_whole, repaired):
        """Waits for the cluster to be whole, then for every quorum queue member to be online.
        With repair on (RabbitMQ 3.x by default), a node that still lists a partition, whose
        RabbitMQ is not running, or whose members stay offline is restarted. Returns quorum."""
        wait = 120
        if not was_whole and not self.cluster_whole(10):
            log(f"{fault}: the cluster is not whole 120 s after the fault (b1's view)")
            if self.repair:
                for _ in range(2):
                    b = self.partitioned_node()
                    if not b:
                        break
                    self.restart_node(fault, b, f"{b} still reports a partition", repaired)
                    if self.cluster_whole(60):
                        break
                if not self.cluster_whole(5):
                    wait = 10
                    b = self.stuck_node()
                    if b:
                        self.restart_node(fault, b, f"RabbitMQ on {b} is not running (its start hung)",
                                          repaired)
                        if self.cluster_whole(60):
                            wait = 120
        quorum = self.await_quorum_whole(wait)
        if quorum == "3/3" or not self.repair:
            return quorum
        b = self.offline_member_node()
        if not b:
            return quorum
        self.restart_node(fault, b, f"quorum queue members on {b} stay offline", repaired)
        if not self.cluster_whole(60):
            log(f"{fault}: the cluster is not whole 60 s after restarting {b} (b1's view)")
        return self.await_quorum_whole()

    # ------------------------------------------------------------ set-up

    def setup(self):
        for b in ("payment_service", "accounting_service", "recovery_service", "outbox_bench",
                  "outboxctl") + (() if self.s.pg else ("outbox_check",)):
            if not os.access(os.path.join(self.bin, b), os.X_OK):
                raise LabError(f"{self.bin}/{b} is missing: build first (scripts/build.sh)")
        version = self.ns("broker-version")
        if self.s.metadata not in ("mnesia", "khepri"):
            raise LabError(f"METADATA must be mnesia or khepri, not '{self.s.metadata}'")
        major = int(version.split(".")[0]) if version[:1].isdigit() else 0
        if self.s.metadata == "khepri" and major < 4:
            raise LabError(f"METADATA=khepri needs RabbitMQ 4.x (the nodes run {version})")
        if self.s.repair not in ("0", "1", "auto"):
            raise LabError(f"REPAIR_BROKERS must be 0, 1 or auto, not '{self.s.repair}'")
        self.repair = self.s.repair == "1" or (self.s.repair == "auto" and version.startswith("3."))
        self.broker = f"{version}/{self.s.metadata}"
        self.work = tempfile.mkdtemp(prefix="oblab.")
        log(f"work dir {self.work}; namespaces {self.prefix}-*")
        self.ns("network", timeout=300)
        self.addrs = {h: self.ip(h) for h in self.hosts}
        log(f"network up: {len(self.hosts)} hosts on 10.213.0.0/24")
        if self.s.pg:
            self.ns("start-pg", timeout=300)
            log(f"PostgreSQL up: primary {self.addrs['pg1']}:{PG_PORT}, synchronous standby "
                f"(remote_apply) {self.addrs['pg2']}:{PG_PORT}; databases outbox (payment, "
                "recovery) and accounting")
        self.ns("start-cluster", timeout=900)
        log(f"RabbitMQ {self.broker} cluster up: rabbit@b1, rabbit@b2, rabbit@b3 "
            f"(repair {'on' if self.repair else 'off'})")
        old = os.umask(0o077)
        try:
            with open(f"{self.work}/message.keys", "w") as f:
                f.write(f"k1 {secrets.token_hex(32)}\n")
        finally:
            os.umask(old)
        for inst in ("acc", "pay", "rec1", "rec2"):
            self.start_service(inst)
        self.add_claim_audit()
        log(f"services up: payment {self.addrs['pay']}, accounting {self.addrs['acc']}, "
            f"recovery {self.addrs['rec1']} and {self.addrs['rec2']}, store {self.s.store}")

    def cleanup(self, ok):
        self.stop_flapping()
        if self.bench is not None and self.bench.poll() is None:
            self.bench.kill()
            self.bench.wait()
        for inst in list(self.svc):
            self.stop_service(inst)
        if self.s.pg and self.work:
            self.ns("stop-pg", timeout=200, check=False)
        self.ns("remove-lab", timeout=300, check=False)
        if self.work and os.path.isdir(self.work):
            if ok and not self.s.keep:
                shutil.rmtree(self.work, ignore_errors=True)
            else:
                print(f"netlab: logs and databases kept in {self.work}", file=sys.stderr)

    # ------------------------------------------------------------ faults

    def other_recovery(self, inst):
        return "rec2" if inst == "rec1" else "rec1"

    def withhold_acks(self):
        """Payment hears nothing from the brokers (its publishes still go out), so rows fall
        due: during the lease faults both recovery instances have something to claim."""
        self.deafen("pay", *BROKERS)

    def fault_length(self, name):
        return {"recovery-pause": self.s.lease_ttl + 10,
                "skew-behind": self.s.lease_ttl + self.s.skew_secs + 10,
                "flapping": self.s.flap_secs}.get(name, self.s.fault_secs)

    def fault_start(self, name):
        """Injects the fault; returns what it hit."""
        s = self.s
        if name == "pay-cut":
            self.cut("pay", *BROKERS)
            return "payment"
        if name == "acc-cut":
            self.cut("acc", *BROKERS)
            return "accounting"
        if name == "recovery-cut":
            victim = self.lease_holder("rec1")
            self.cut(victim, *BROKERS)
            return victim
        if name in ("broker-follower", "broker-leader"):
            victim = self.queue_leader("PAY_QUEUE") or "b1"
            if name == "broker-follower":
                victim = random.choice([b for b in BROKERS if b != victim])
            self.cut(victim, *[h for h in self.hosts if h != victim])
            return victim
        if name == "pay-oneway":
            self.deafen("pay", *BROKERS)
            return "payment (inbound)"
        if name == "flapping":
            self.start_flapping()
            return "random halves of " + " ".join(FLAP_HOSTS)
        if name == "pay-slow":
            self.ns("in-host", "pay", "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
                    s.slow_rate, "burst", "32kbit", "latency", "400ms")
            return f"payment ({s.slow_rate})"
        if name == "recovery-pause":
            victim = self.lease_holder("rec1")
            self.withhold_acks()
            self.svc[victim].send_signal(signal.SIGSTOP)
            return victim
        if name == "skew-ahead":
            # The standby's clock runs ahead: the holder's lease looks expired to it.
            victim = self.other_recovery(self.lease_holder("rec1"))
            self.withhold_acks()
            self.restart_recovery(victim, f"+{s.skew_secs}s")
            return f"{victim} (+{s.skew_secs} s)"
        if name == "skew-behind":
            # The standby's clock runs behind; the holder stalls until the standby has taken
            # over, then resumes: the slow clock's lease, already expired by everyone else's
            # clock, is taken back and its holder is fenced.
            victim = self.other_recovery(self.lease_holder("rec1"))
            self.withhold_acks()
            self.restart_recovery(victim, f"-{s.skew_secs}s")
            self.svc[self.other_recovery(victim)].send_signal(signal.SIGSTOP)
            return f"{victim} (-{s.skew_secs} s; {self.other_recovery(victim)} paused)"
        if name == "pay-db-cut":
            for inst in ("pay", "rec1", "rec2"):
                self.cut(inst, "pg1")
            return "payment, recovery <-> pg1"
        if name == "pg-standby-cut":
            self.cut("pg1", "pg2")
            return "pg1 <-> pg2"
        if name == "netem-lossy":
            self.ns("in-host", "pay", "tc", "qdisc", "add", "dev", "eth0", "root", "netem",
                    "delay", "200ms", "50ms", "loss", "5%")
            return "payment"
        raise LabError(f"unknown fault {name}")

    def fault_stop(self, name, victim):
        inst = victim.split()[0]
        if name == "recovery-pause":
            self.svc[inst].send_signal(signal.SIGCONT)
        elif name == "skew-ahead":
            self.restart_recovery(inst)
        elif name == "skew-behind":
            holder = self.other_recovery(inst)
            self.svc[holder].send_signal(signal.SIGCONT)
            deadline = time.monotonic() + 30
            while self.lease_holder() != holder and time.monotonic() < deadline:
                time.sleep(0.5)
            if self.lease_holder() != holder:
                log(f"skew-behind: the lease did not go back to {holder}")
            self.restart_recovery(inst)
        elif name == "flapping":
            self.stop_flapping()
        if name in ("pay-slow", "netem-lossy"):
            self.ns("in-host", "pay", "tc", "qdisc", "del", "dev", "eth0", "root")
        else:
            self.heal_all()

    def start_flapping(self):
        """Until stopped, every FLAP_MIN..FLAP_MAX s heals and splits FLAP_HOSTS into two random
        halves cut from each other (the load client keeps its links: creates are measured)."""
        self.flap_stop.clear()

        def loop():
            while not self.flap_stop.is_set():
                self.heal_all()
                hosts = random.sample(FLAP_HOSTS, len(FLAP_HOSTS))
                half = random.randint(1, len(hosts) - 1)
                for a in hosts[:half]:
                    self.cut(a, *hosts[half:])
                log(f"flapping: {{{' '.join(hosts[:half])}}} | {{{' '.join(hosts[half:])}}}")
                self.flap_stop.wait(random.randint(FLAP_MIN, FLAP_MAX))

        self.flapper = threading.Thread(target=loop, daemon=True)
        self.flapper.start()

    def stop_flapping(self):
        if self.flapper is not None:
            self.flap_stop.set()
            self.flapper.join()
            self.flapper = None

    # ------------------------------------------------------------ one fault

    def await_healed(self, since):
        """Once no row created before SINCE (ms) is SENDING: the heal (judge.heal_seconds)."""
        deadline = time.monotonic() + self.s.heal_timeout
        while time.monotonic() < deadline:
            n = self.pdb(f"SELECT count(*) FROM outbox WHERE status = 'SENDING' AND created_at <= {since}")
            if n == 0:
                last = self.pdb("SELECT coalesce(max(sent_at), 0) FROM outbox "
                                f"WHERE status = 'SENT' AND created_at <= {since}")
                if isinstance(last, int):
                    return judge.heal_seconds(last, since)
            time.sleep(0.5)
        return "timeout"

    def await_all_sent(self):
        deadline = time.monotonic() + self.s.heal_timeout
        while time.monotonic() < deadline:
            if self.pdb("SELECT count(*) FROM outbox WHERE status = 'SENDING'") == 0:
                return True
            time.sleep(1)
        return False

    def await_no_alerts(self):
        deadline = time.monotonic() + 90
        while True:
            n = self.metric("rec1", "outbox_alerts_active") + self.metric("rec2", "outbox_alerts_active")
            if n == 0 or time.monotonic() >= deadline:
                return n
            time.sleep(2)

    def log_lines(self, inst):
        with open(f"{self.work}/{inst}.log", errors="replace") as f:
            return f.readlines()

    def run_fault(self, name):
        s = self.s
        stem, n = name, 2
        while os.path.exists(f"{self.work}/{stem}.ledger.csv"):  # a fault named twice keeps both
            stem, n = f"{name}.{n}", n + 1
        bench_out, ledger = f"{self.work}/{stem}.bench.txt", f"{self.work}/{stem}.ledger.csv"
        length = self.fault_length(name)
        rec_from = {i: len(self.log_lines(i)) for i in ("rec1", "rec2", "pay")}
        delivered0 = self.deliveries()
        log(f"{name}: load at {s.rate}/s for {WARMUP + s.pre + length + s.post} s, "
            f"fault for {length} s after {WARMUP + s.pre} s")
        with open(bench_out, "w") as out:
            self.bench = subprocess.Popen(
                [NS, "in-host", "load", f"{self.bin}/outbox_bench",
                 f"--payment_addr={self.addrs['pay']}:50051",
                 f"--accounting_addr={self.addrs['acc']}:50052", f"--rate={s.rate}",
                 f"--warmup={WARMUP}s", f"--duration={s.pre + length + s.post}s",
                 f"--drain_timeout={s.heal_timeout}s", f"--label={name}", f"--ledger={ledger}",
                 "--json"], env=self.env(), stdout=out, stderr=subprocess.STDOUT)
        time.sleep(WARMUP + s.pre)
        t_fault = now_ms()
        victim = self.fault_start(name)
        at_fault = self.commits() if self.s.pg else None
        log(f"{name}: fault on {victim} (lease: {self.lease_holder('')})")
        time.sleep(length)
        at_heal = self.commits() if self.s.pg else None
        self.fault_stop(name, victim)
        t_heal = now_ms()
        log(f"{name}: healed after {(t_heal - t_fault) // 1000} s (lease: {self.lease_holder('')})")
        db_heal, db_stop = {}, threading.Event()
        if self.s.pg:
            if at_fault is not None and at_heal is not None:
                log(f"{name}: payments committed while the fault lasted: {at_heal - at_fault}")
            db_watcher = threading.Thread(target=self.watch_db_heal,
                                          args=(t_heal, at_heal, db_stop, db_heal), daemon=True)
            db_watcher.start()
        whole = {}
        watcher = threading.Thread(target=self.watch_whole, args=(t_heal, whole), daemon=True)
        watcher.start()
        heal = self.await_healed(t_heal)
        log(f"{name}: rows created before the heal all SENT, the last {heal} s after it (sent_at)")
        if self.bench.wait() != 0:
            log(f"{name}: outbox_bench exited non-zero (see {bench_out})")
        self.bench = None
        db_stop.set()
        if self.s.pg:
            db_watcher.join()
            log(f"{name}: the first payment committed after the fault's end: "
                f"{db_heal.get('secs', 'none')} s after it")
        if not self.await_all_sent():
            log(f"{name}: rows still SENDING after {s.heal_timeout} s")
        watcher.join()
        repaired = []
        quorum = self.settle_cluster(name, "secs" in whole, repaired)
        alerts = self.await_no_alerts()
        log(f"{name}: cluster whole {whole.get('secs', 'no')} s after the fault, "
            f"quorum members {quorum}, alerts left {alerts}")
        with open(bench_out, errors="replace") as f:
            bench_text = f.read()
        refused = judge.refusals_in_log(self.log_lines("pay")[rec_from["pay"]:])
        failed = judge.json_figure(bench_text, "create_failed")
        skipped = judge.json_figure(bench_text, "create_skipped")
        claims = []
        for inst in ("rec1", "rec2"):
            claims += judge.claims_in_log(self.log_lines(inst)[rec_from[inst]:], inst)
        payment_db, accounting_db = self.snapshot(stem)
        figures = judge.judge_ledger(judge.read_ledger(ledger) if os.path.exists(ledger) else [],
                                     claims, payment_db, accounting_db,
                                     self.deliveries() - delivered0)
        if self.s.pg:
            check_rc, integrity = None, judge.SKIPPED  # outbox_check and the files are SQLite's
        else:
            with open(f"{self.work}/{stem}.check.txt", "w") as out:
                check_rc = subprocess.run([f"{self.bin}/outbox_check",
                                           f"--payment_db={self.work}/payment.db",
                                           f"--accounting_db={self.work}/accounting.db"],
                                          stdout=out, stderr=subprocess.STDOUT).returncode
            integrity = self.files_integrity(f"{self.work}/{stem}.integrity.txt")
        row = judge.Row(
            fault=name, broker=self.broker, secs=length, ledger=figures, heal=heal,
            whole=whole.get("secs", "no"),
            errors=f"{'?' if failed is None else failed}/{'?' if skipped is None else skipped} "
                   f"{judge.error_codes(bench_text)}" + (f" refused {refused}" if refused else ""),
            quorum=quorum, alerts=alerts, check_rc=check_rc,
            integrity=integrity, restarted=repaired,
            db_heal=db_heal.get("secs", "no") if self.s.pg else "-")
        f = row.ledger
        log(f"{name}: acked={f.acked} lost={f.lost} dups={f.dups} heal={heal} db-heal={row.db_heal} "
            f"whole={row.whole} "
            f"attempts={f.attempts} copies={f.copies} FAILED={f.failed_rows} errors={row.errors} "
            f"stale_claims={f.stale} both={f.both} quorum={quorum} alerts={alerts} "
            f"check={check_rc} files={row.integrity}" + (f" restarted={' '.join(repaired)}" if repaired else "")
            + f" -> {row.verdict()}")
        return row

    def watch_whole(self, since_ms, result):
        """From the fault's end: when b1 first sees 3 running nodes and no partition (up to 120 s),
        in seconds with one decimal, into result['secs']."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if judge.is_whole(self.view("b1")):
                result["secs"] = "%.1f" % ((now_ms() - since_ms) / 1000)
                return
            time.sleep(1)


def faults_of(which, netem, pg=False):
    """The faults named by WHICH, comma-separated, in order; "all" is every one (with PG,
    PostgreSQL's too)."""
    known = FAULTS + (PG_FAULTS if pg else [])
    faults = []
    for f in which.split(","):
        faults += known + (["netem-lossy"] if netem else []) if f == "all" else [f]
    for f in faults:
        if f in PG_FAULTS and not pg:
            raise LabError(f"{f} needs STORE=postgres")
        if f not in known and f != "netem-lossy":
            raise LabError(f"unknown fault '{f}' (one of: {' '.join(FAULTS + PG_FAULTS)} "
                           "netem-lossy, or all)")
    return faults


def cmd_run(which):
    if os.geteuid() != 0:
        raise LabError("needs root (network namespaces, nft); run as root")
    settings = Settings(os.environ)
    if settings.store not in ("sqlite", "postgres"):
        raise LabError(f"STORE must be sqlite or postgres, not '{settings.store}'")
    lab = Lab(settings)
    faults_of(which, True, settings.pg)  # names checked before anything is built
    ok = False
    try:
        lab.ns("clean-stale", timeout=300, check=False)
        lab.setup()
        netem = lab.ns("netem-present", check=False) is not None
        if not netem:
            print("netem: absent, latency/loss faults skipped", flush=True)
            if "netem-lossy" in which.split(","):
                raise LabError("netem-lossy needs netem")
        rows = [lab.run_fault(f) for f in faults_of(which, netem, settings.pg)]
        print(judge.format_table(rows), flush=True)
        if settings.pg:
            by_status = lab.psql("outbox", "SELECT status || ' ' || count(*) FROM outbox "
                                 "GROUP BY status ORDER BY status") or ""
            vouchers = lab.psql("accounting", "SELECT count(*) FROM vouchers") or "?"
            print(f"payments (outbox rows by status): {', '.join(by_status.split(chr(10))).strip(', ')}")
            print(f"vouchers: {vouchers.strip()}")
        else:
            summary = subprocess.run([f"{lab.bin}/outbox_check", f"--payment_db={lab.work}/payment.db",
                                      f"--accounting_db={lab.work}/accounting.db"],
                                     stdout=subprocess.PIPE, text=True).stdout
            inside = False
            for line in summary.splitlines():
                inside = inside or line.startswith("payments:")
                if inside:
                    print(line)
                if line.startswith("vouchers:"):
                    break
        ok = all(r.verdict() == "OK" for r in rows)
        print("RESULT OK" if ok else "RESULT FAILED", flush=True)
        return 0 if ok else 1
    finally:
        lab.cleanup(ok)


def main(argv):
    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    if len(argv) < 2 or argv[1] != "run":
        print("usage: lab.py run [FAULT[,FAULT...]|all]", file=sys.stderr)
        return 2
    try:
        return cmd_run(argv[2] if len(argv) > 2 else "all")
    except LabError as e:
        print(f"netlab: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The network lab's judging: what one fault's run left behind, read and
judged. Pure functions over text and database files, so they are tested
without a lab (judge_test.py); scripts/netlab/lab.py collects the inputs.

A fault passes when every payment the client was answered OK for is stored
with its amount, SENT, with exactly one voucher of the same amount; no row
is FAILED; no recovery instance claimed a row while the lease named another;
every quorum queue has 3 of 3 members online; no alert is left; outbox_check
exits 0 and PRAGMA integrity_check passes on both files (SQLite's checks:
skipped on PostgreSQL, whose tables the lab copies through psql into SQLite
files of the same columns, snapshot_db, so the ledger is judged by the same
query).
"""

import csv
import dataclasses
import io
import json
import re
import sqlite3

# The table's columns, in order, with their widths (negative: left-aligned).
COLUMNS = [
    ("fault", -15), ("broker", -13), ("secs", -5), ("acked", 6), ("lost", 4),
    ("dups", 4), ("heal(s)", 7), ("db-heal(s)", 10), ("whole(s)", 8), ("FAILED", 6),
    ("attempts", -9), ("copies", 6), ("errors", -16), ("stale", 5),
    ("both", 4), ("quorum", 6), ("alerts", 6), ("check", 0),
]


SKIPPED = "skipped"  # Row.integrity when the files' checks do not apply (PostgreSQL)


@dataclasses.dataclass
class Ledger:
    """What the ledger and the two databases say of one fault's payments."""
    acked: int = 0
    lost: int = 0
    dups: int = 0
    attempts: str = "-"
    copies: str = "-"
    failed_rows: int = 0
    stale: int = 0
    both: int = 0


@dataclasses.dataclass
class Row:
    """One fault's row of the table."""
    fault: str
    broker: str
    secs: int
    ledger: Ledger
    heal: str                 # seconds with one decimal, or "timeout"
    whole: str                # seconds until the cluster was whole again, or "no"
    errors: str               # "failed/skipped codes" at the client
    quorum: str               # "3/3" or the worst "n/3"
    alerts: int
    check_rc: int             # outbox_check's exit status; None: skipped (PostgreSQL)
    integrity: str            # "ok", "BAD" or SKIPPED (PostgreSQL)
    restarted: list = dataclasses.field(default_factory=list)
    db_heal: str = "-"        # PostgreSQL: seconds from the fault's end to the first payment
                              # committed after it, "no" if none; "-": not measured

    def failures(self):
        """The checks this row fails, by name; empty when it passes."""
        bad = []
        if self.check_rc is not None and self.check_rc != 0:
            bad.append("check")
        if self.integrity not in ("ok", SKIPPED):
            bad.append("files")
        for name in ("lost", "dups", "failed_rows", "stale"):
            if getattr(self.ledger, name) != 0:
                bad.append(name)
        if self.heal == "timeout":
            bad.append("heal")
        if self.db_heal == "no":
            bad.append("db_heal")
        if self.quorum != "3/3":
            bad.append("quorum")
        if self.alerts != 0:
            bad.append("alerts")
        if self.ledger.acked == 0:
            bad.append("acked")
        return bad

    def verdict(self):
        return "FAILED" if self.failures() else "OK"

    def healed_by_itself(self):
        """The cluster came back whole, every member online, without a restart by the lab."""
        return not self.restarted and self.quorum == "3/3" and self.whole != "no"

    def cells(self):
        restarted = ", restarted " + " ".join(self.restarted) if self.restarted else ""
        if self.check_rc is None:
            checks = "outbox_check and files skipped: PostgreSQL"
        else:
            checks = f"check {self.check_rc}, files {self.integrity}"
        return [self.fault, self.broker, f"{self.secs}s", self.ledger.acked, self.ledger.lost,
                self.ledger.dups, self.heal, self.db_heal, self.whole, self.ledger.failed_rows,
                self.ledger.attempts, self.ledger.copies, self.errors, self.ledger.stale,
                self.ledger.both, self.quorum, self.alerts,
                f"{self.verdict()} ({checks}{restarted})"]


def format_line(cells):
    """One aligned line of the table."""
    out = []
    for (_, width), cell in zip(COLUMNS, cells):
        text = str(cell)
        out.append(text.ljust(-width) if width < 0 else text.rjust(width))
    return " ".join(out).rstrip()


def format_table(rows):
    """The table: a header, one line per row, and the faults after which the lab restarted a node."""
    lines = ["", format_line([name for name, _ in COLUMNS])]
    lines += [format_line(r.cells()) for r in rows]
    repaired = [r for r in rows if r.restarted]
    if repaired:
        lines += ["", "RabbitMQ left a node partitioned or its queue members offline after the "
                  "network healed; the lab restarted it (fault: nodes):"]
        lines += [f"  {r.fault}: {' '.join(r.restarted)}" for r in repaired]
    return "\n".join(lines)


# ------------------------------------------------------------ the client's output

def json_figure(text, name):
    """The figure NAME of outbox_bench's last --json line, as an integer; None if absent."""
    found = re.findall(r'"%s":([0-9.]+)' % re.escape(name), text)
    return int(float(found[-1])) if found else None


def error_codes(text):
    """outbox_bench's last "create errors" codes as "code14=3,code4=1", or "-"."""
    found = re.findall(r"create errors +((?: code[0-9]+=[0-9]+)+);", text)
    return ",".join(found[-1].split()) if found else "-"


def read_ledger(path):
    """The client's ledger: (payment_id, amount, message_id) for every create answered OK."""
    with open(path, newline="") as f:
        return [(r[0], int(r[1]), r[2]) for r in csv.reader(f) if len(r) >= 3]


# ------------------------------------------------------------ the services' output

def claims_in_log(lines, instance):
    """The re-publishes a recovery instance logged: (instance, message_id, attempt) per
    message_republished or message_republish_failed line (the event is the third field)."""
    out = []
    for line in lines:
        fields = line.split()
        if len(fields) < 3 or fields[2] not in ("message_republished", "message_republish_failed"):
            continue
        kv = dict(f.split("=", 1) for f in fields[3:] if "=" in f)
        attempt = kv.get("attempt", "")
        out.append((instance, kv.get("message_id", ""), int(attempt) if attempt.isdigit() else None))
    return out


def refusals_in_log(lines):
    """The creates payment_service answered with an error (create_payment_failed lines: the
    event is the third field). The client's channel sends an UNAVAILABLE one again
    (client/channel.h), so they need not show among the client's failures."""
    return sum(1 for line in lines if line.split()[2:3] == ["create_payment_failed"])


def metric_sum(text, name):
    """The sum of NAME's samples in a Prometheus text page (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and (fields[0] == name or fields[0].startswith(name + "{")):
            try:
                total += float(fields[-1])
            except ValueError:
                pass
    return int(total)


# ------------------------------------------------------------ the brokers' answers

def node_view(out):
    """rabbitmqctl eval of {length(rabbit_nodes:all_running()), rabbit_node_monitor:partitions()}:
    (running, [partitioned from...]), or None when the node did not answer so."""
    m = re.fullmatch(r"\{(\d+),\[(.*)\]\}", out.strip())
    if not m:
        return None
    nodes = [n.strip().strip("'") for n in m.group(2).split(",") if n.strip()]
    return int(m.group(1)), nodes


def is_whole(view, nodes=3):
    return view is not None and view == (nodes, [])


def fewest_online(list_queues_json):
    """The fewest online members of any quorum queue in `list_queues name type online
    --formatter json`; None when the answer is not that."""
    try:
        queues = json.loads(list_queues_json)
    except ValueError:
        return None
    counts = [len(q.get("online", [])) for q in queues if q.get("type") == "quorum"]
    return min(counts) if counts else 0


def most_offline_node(list_queues_json):
    """The host (b1..b3) holding the most quorum queue members not online, from
    `list_queues name type members online --formatter json`; None when every member is."""
    try:
        queues = json.loads(list_queues_json)
    except ValueError:
        return None
    count = {}
    for q in queues:
        if q.get("type") != "quorum":
            continue
        for m in set(q.get("members", [])) - set(q.get("online", [])):
            count[m] = count.get(m, 0) + 1
    if not count:
        return None
    node = max(sorted(count), key=lambda n: count[n])
    return node.split("@", 1)[-1]


def queue_leader(list_queues_text, queue):
    """The host leading QUEUE in `list_queues --no-table-headers name leader`, or None."""
    for line in list_queues_text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == queue:
            return fields[1].split("@", 1)[-1]
    return None


# ------------------------------------------------------------ the databases

def heal_seconds(last_sent_ms, since_ms):
    """The heal, one decimal: the latest sent_at of the rows created before SINCE_MS,
    minus SINCE_MS; 0.0 when they were all SENT before it."""
    return "%.1f" % (max(last_sent_ms - since_ms, 0) / 1000)


# What judge_ledger reads of each PostgreSQL database: (database, [(table, [column
# definitions])]), the same tables and columns as payment.db's and accounting.db's.
PG_TABLES = [
    ("outbox", [
        ("payments", ["payment_id TEXT", "amount_minor INTEGER"]),
        ("outbox", ["message_id TEXT", "status TEXT", "attempts INTEGER", "created_at INTEGER",
                    "sent_at INTEGER"]),
        ("netlab_claims", ["message_id TEXT", "attempts INTEGER", "holder TEXT",
                           "expires_at INTEGER"]),
    ]),
    ("accounting", [
        ("vouchers", ["payment_id TEXT", "amount_minor INTEGER"]),
    ]),
]


def snapshot_db(path, tables):
    """Writes the SQLite file PATH (replacing it) holding TABLES: (name, [column definitions],
    CSV text as COPY ... TO STDOUT WITH (FORMAT csv) prints it). The declared types make
    the numbers numbers again; each table is indexed on its first two columns, the keys
    judge_ledger looks rows up by (payment_id, message_id, with amount or attempts)."""
    db = sqlite3.connect(path)
    try:
        for name, columns, text in tables:
            db.execute(f"DROP TABLE IF EXISTS {name}")
            db.execute(f"CREATE TABLE {name} ({', '.join(columns)})")
            rows = [r for r in csv.reader(io.StringIO(text)) if r]
            for r in rows:
                if len(r) != len(columns):
                    raise ValueError(f"{name}: a row of {len(r)} fields, not {len(columns)}: {r}")
            db.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(columns))})", rows)
            keys = ", ".join(c.split()[0] for c in columns[:2])
            db.execute(f"CREATE INDEX {name}_keys ON {name} ({keys})")
        db.commit()
    finally:
        db.close()


def judge_ledger(ledger, claims, payment_db, accounting_db, delivered):
    """Checks LEDGER (read_ledger's rows) against payment.db and accounting.db (opened
    read-only) and CLAIMS (claims_in_log's) against the lab's netlab_claims table;
    DELIVERED is the messages accounting took from PAY_QUEUE during the run."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE TABLE ledger (payment_id TEXT PRIMARY KEY, amount INTEGER, message_id TEXT)")
        db.execute("CREATE TABLE claims (instance TEXT, message_id TEXT, attempt INTEGER)")
        db.executemany("INSERT OR REPLACE INTO ledger VALUES (?, ?, ?)", ledger)
        db.executemany("INSERT INTO claims VALUES (?, ?, ?)", claims)
        db.execute("ATTACH ? AS p", (f"file:{payment_db}?mode=ro",))
        db.execute("ATTACH ? AS a", (f"file:{accounting_db}?mode=ro",))
        row = db.execute("""
          WITH checked AS (
            SELECT l.payment_id,
                   EXISTS (SELECT 1 FROM p.payments x
                           WHERE x.payment_id = l.payment_id AND x.amount_minor = l.amount) AS stored,
                   (SELECT o.status FROM p.outbox o WHERE o.message_id = l.message_id) AS status,
                   (SELECT o.attempts FROM p.outbox o WHERE o.message_id = l.message_id) AS attempts,
                   (SELECT count(*) FROM a.vouchers v
                    WHERE v.payment_id = l.payment_id AND v.amount_minor = l.amount) AS vouchers
            FROM ledger l)
          SELECT count(*),
                 coalesce(sum(NOT stored OR coalesce(status, '') != 'SENT' OR vouchers = 0), 0),
                 coalesce(sum(vouchers > 1), 0),
                 avg(attempts), max(attempts),
                 (SELECT count(*) FROM p.outbox WHERE status = 'FAILED'),
                 (SELECT count(*) FROM claims c WHERE NOT EXISTS (SELECT 1 FROM p.netlab_claims n
                    WHERE n.message_id = c.message_id AND n.attempts = c.attempt
                      AND n.holder = c.instance)),
                 (SELECT count(*) FROM (SELECT message_id FROM claims GROUP BY message_id
                                        HAVING count(DISTINCT instance) > 1))
          FROM checked""").fetchone()
    finally:
        db.close()
    acked, lost, dups, avg_att, max_att, failed_rows, stale, both = row
    return Ledger(
        acked=acked, lost=lost, dups=dups,
        attempts="%.2f/%d" % (avg_att, max_att) if avg_att is not None else "-",
        copies="%.2f" % (delivered / max(acked, 1)),
        failed_rows=failed_rows, stale=stale, both=both)

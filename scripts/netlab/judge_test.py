"""Tests of the network lab's judging (judge.py), without a lab: the ledger
against small payment.db and accounting.db files, and the parsers against
the text the client, the services and rabbitmqctl print.

    /usr/bin/python3 scripts/netlab/judge_test.py   (ctest netlab.judge)
"""

import os
import sqlite3
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge  # noqa: E402


class LedgerTest(unittest.TestCase):
    """judge_ledger over real SQLite files with the columns the lab reads."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.pay = os.path.join(self.dir.name, "payment.db")
        self.acc = os.path.join(self.dir.name, "accounting.db")
        db = sqlite3.connect(self.pay)
        db.executescript("""
          CREATE TABLE payments (payment_id TEXT PRIMARY KEY, amount_minor INTEGER);
          CREATE TABLE outbox (message_id TEXT PRIMARY KEY, status TEXT, attempts INTEGER,
                               created_at INTEGER, sent_at INTEGER);
          CREATE TABLE netlab_claims (message_id TEXT, attempts INTEGER, holder TEXT, expires_at INTEGER);""")
        db.commit()
        db.close()
        db = sqlite3.connect(self.acc)
        db.execute("CREATE TABLE vouchers (voucher_id INTEGER PRIMARY KEY, payment_id TEXT, amount_minor INTEGER)")
        db.commit()
        db.close()

    def tearDown(self):
        self.dir.cleanup()

    def pay_rows(self, *rows):
        """(payment_id, amount, status, attempts) rows, message id m-<payment_id>."""
        db = sqlite3.connect(self.pay)
        for pid, amount, status, attempts in rows:
            db.execute("INSERT INTO payments VALUES (?, ?)", (pid, amount))
            db.execute("INSERT INTO outbox VALUES (?, ?, ?, 0, 0)", (f"m-{pid}", status, attempts))
        db.commit()
        db.close()

    def vouchers(self, *rows):
        db = sqlite3.connect(self.acc)
        db.executemany("INSERT INTO vouchers (payment_id, amount_minor) VALUES (?, ?)", rows)
        db.commit()
        db.close()

    def claims_recorded(self, *rows):
        db = sqlite3.connect(self.pay)
        db.executemany("INSERT INTO netlab_claims VALUES (?, ?, ?, 0)", rows)
        db.commit()
        db.close()

    def judge(self, ledger, claims=(), delivered=None):
        return judge.judge_ledger(ledger, list(claims), self.pay, self.acc,
                                  len(ledger) if delivered is None else delivered)

    def test_every_acked_payment_sent_with_one_voucher_passes(self):
        self.pay_rows(("p1", 100, "SENT", 1), ("p2", 200, "SENT", 2))
        self.vouchers(("p1", 100), ("p2", 200))
        f = self.judge([("p1", 100, "m-p1"), ("p2", 200, "m-p2")])
        self.assertEqual((f.acked, f.lost, f.dups, f.failed_rows, f.stale, f.both), (2, 0, 0, 0, 0, 0))
        self.assertEqual(f.attempts, "1.50/2")
        self.assertEqual(f.copies, "1.00")

    def test_a_payment_missing_not_sent_without_voucher_or_of_another_amount_is_lost(self):
        self.pay_rows(("p2", 200, "SENDING", 1), ("p3", 300, "SENT", 1), ("p4", 999, "SENT", 1),
                      ("p5", 500, "SENT", 1))
        self.vouchers(("p2", 200), ("p4", 400), ("p5", 500))
        f = self.judge([("p1", 100, "m-p1"), ("p2", 200, "m-p2"), ("p3", 300, "m-p3"),
                        ("p4", 400, "m-p4"), ("p5", 500, "m-p5")])
        self.assertEqual((f.acked, f.lost, f.dups), (5, 4, 0))

    def test_a_voucher_of_another_amount_does_not_count(self):
        self.pay_rows(("p1", 100, "SENT", 1))
        self.vouchers(("p1", 101))
        self.assertEqual(self.judge([("p1", 100, "m-p1")]).lost, 1)

    def test_two_vouchers_of_one_payment_are_a_duplicate(self):
        self.pay_rows(("p1", 100, "SENT", 2))
        self.vouchers(("p1", 100), ("p1", 100))
        f = self.judge([("p1", 100, "m-p1")], delivered=2)
        self.assertEqual((f.lost, f.dups), (0, 1))
        self.assertEqual(f.copies, "2.00")

    def test_failed_rows_are_counted_whether_acked_or_not(self):
        self.pay_rows(("p1", 100, "SENT", 1), ("p9", 900, "FAILED", 5))
        self.vouchers(("p1", 100))
        self.assertEqual(self.judge([("p1", 100, "m-p1")]).failed_rows, 1)

    def test_a_claim_the_lease_did_not_name_is_stale(self):
        self.pay_rows(("p1", 100, "SENT", 3))
        self.vouchers(("p1", 100))
        self.claims_recorded(("m-p1", 2, "rec1"), ("m-p1", 3, "rec1"))
        f = self.judge([("p1", 100, "m-p1")], claims=[("rec1", "m-p1", 2), ("rec2", "m-p1", 3)])
        self.assertEqual((f.stale, f.both), (1, 1))

    def test_claims_under_the_lease_are_not_stale(self):
        self.pay_rows(("p1", 100, "SENT", 3))
        self.vouchers(("p1", 100))
        self.claims_recorded(("m-p1", 2, "rec1"), ("m-p1", 3, "rec1"))
        f = self.judge([("p1", 100, "m-p1")], claims=[("rec1", "m-p1", 2), ("rec1", "m-p1", 3)])
        self.assertEqual((f.stale, f.both), (0, 0))

    def test_an_empty_ledger_acks_nothing(self):
        f = self.judge([])
        self.assertEqual((f.acked, f.lost, f.dups, f.attempts), (0, 0, 0, "-"))

    def test_the_ledger_file_is_read_as_the_client_writes_it(self):
        path = os.path.join(self.dir.name, "ledger.csv")
        with open(path, "w") as out:
            out.write("p1,100,m-p1\np2,250,m-p2\n")
        self.assertEqual(judge.read_ledger(path), [("p1", 100, "m-p1"), ("p2", 250, "m-p2")])


class PgSnapshotTest(unittest.TestCase):
    """PostgreSQL's tables as COPY ... TO STDOUT WITH (FORMAT csv) prints them, made SQLite
    files of judge.PG_TABLES's columns and judged by the same query."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def snapshot(self, db, **csv_of):
        path = os.path.join(self.dir.name, f"{db}.db")
        tables = dict(judge.PG_TABLES)[db]
        judge.snapshot_db(path, [(t, cols, csv_of.get(t, "")) for t, cols in tables])
        return path

    def test_copied_tables_are_judged_as_the_files_are(self):
        pay = self.snapshot(
            "outbox",
            payments='p1,100\np2,200\np3,300\n"p,4",400\n',
            outbox="m-p1,SENT,1,10,20\nm-p2,SENDING,1,10,0\nm-p3,SENT,3,10,30\n"
                   "m-p4,SENT,1,10,20\nm-p9,FAILED,5,10,0\n",
            netlab_claims="m-p3,2,rec1,99\nm-p3,3,rec1,99\n")
        acc = self.snapshot("accounting", vouchers='p1,100\np2,200\np3,300\n"p,4",400\n')
        f = judge.judge_ledger([("p1", 100, "m-p1"), ("p2", 200, "m-p2"), ("p3", 300, "m-p3"),
                                ("p,4", 400, "m-p4")],
                               [("rec1", "m-p3", 2), ("rec2", "m-p3", 3)], pay, acc, 4)
        self.assertEqual((f.acked, f.lost, f.dups, f.failed_rows, f.stale, f.both),
                         (4, 1, 0, 1, 1, 1))
        self.assertEqual(f.attempts, "1.50/3")

    def test_numbers_are_numbers_and_a_snapshot_replaces_the_last(self):
        self.snapshot("accounting", vouchers="p1,100\n")
        path = self.snapshot("accounting", vouchers="p1,007\np2,5\n")
        db = sqlite3.connect(path)
        try:
            self.assertEqual(db.execute("SELECT payment_id, amount_minor, typeof(amount_minor) "
                                        "FROM vouchers ORDER BY 1").fetchall(),
                             [("p1", 7, "integer"), ("p2", 5, "integer")])
        finally:
            db.close()

    def test_a_large_ledger_is_judged_through_the_indexes(self):
        n = 20000
        ids = [f"p{i}" for i in range(n)]
        pay = self.snapshot("outbox",
                            payments="".join(f"{p},1\n" for p in ids),
                            outbox="".join(f"m-{p},SENT,1,0,0\n" for p in ids))
        acc = self.snapshot("accounting", vouchers="".join(f"{p},1\n" for p in ids))
        db = sqlite3.connect(pay)
        try:
            plan = " ".join(r[-1] for r in db.execute(
                "EXPLAIN QUERY PLAN SELECT status FROM outbox WHERE message_id = 'm-p1'"))
        finally:
            db.close()
        self.assertIn("INDEX outbox_keys", plan)
        f = judge.judge_ledger([(p, 1, f"m-{p}") for p in ids], [], pay, acc, n)
        self.assertEqual((f.acked, f.lost, f.dups), (n, 0, 0))

    def test_empty_tables_and_a_short_row(self):
        pay = self.snapshot("outbox")
        acc = self.snapshot("accounting")
        f = judge.judge_ledger([("p1", 100, "m-p1")], [], pay, acc, 0)
        self.assertEqual((f.acked, f.lost), (1, 1))
        with self.assertRaises(ValueError):
            self.snapshot("accounting", vouchers="p1\n")


def row(**changes):
    base = dict(fault="pay-cut", broker="4.0.5/khepri", secs=30,
                ledger=judge.Ledger(acked=10, attempts="1.00/1", copies="1.00"), heal="0.4",
                whole="1.0", errors="0/0 -", quorum="3/3", alerts=0, check_rc=0, integrity="ok")
    base.update(changes)
    return judge.Row(**base)


class VerdictTest(unittest.TestCase):
    def test_a_clean_row_passes_and_healed_by_itself(self):
        r = row()
        self.assertEqual(r.verdict(), "OK")
        self.assertTrue(r.healed_by_itself())

    def test_each_check_fails_the_row(self):
        cases = {
            "lost": row(ledger=judge.Ledger(acked=10, lost=1)),
            "dups": row(ledger=judge.Ledger(acked=10, dups=1)),
            "failed_rows": row(ledger=judge.Ledger(acked=10, failed_rows=1)),
            "stale": row(ledger=judge.Ledger(acked=10, stale=1)),
            "acked": row(ledger=judge.Ledger(acked=0)),
            "heal": row(heal="timeout"),
            "quorum": row(quorum="2/3"),
            "alerts": row(alerts=1),
            "check": row(check_rc=3),
            "files": row(integrity="BAD"),
            "db_heal": row(db_heal="no"),
        }
        for name, r in cases.items():
            self.assertEqual(r.failures(), [name], name)
            self.assertEqual(r.verdict(), "FAILED", name)

    def test_on_postgresql_the_files_checks_are_skipped_and_said_so(self):
        r = row(check_rc=None, integrity=judge.SKIPPED, db_heal="0.7")
        self.assertEqual(r.verdict(), "OK")
        line = judge.format_table([r]).splitlines()[2]
        self.assertTrue(line.endswith("OK (outbox_check and files skipped: PostgreSQL)"), line)
        self.assertIn(" 0.7 ", line)

    def test_a_slow_heal_or_both_instances_publishing_is_reported_not_failed(self):
        self.assertEqual(row(heal="42.0", ledger=judge.Ledger(acked=10, both=3)).verdict(), "OK")

    def test_a_node_the_lab_restarted_passes_but_did_not_heal_by_itself(self):
        r = row(restarted=["b2"])
        self.assertEqual(r.verdict(), "OK")
        self.assertFalse(r.healed_by_itself())
        self.assertFalse(row(whole="no").healed_by_itself())

    def test_the_table_names_broker_and_store_and_lists_restarts(self):
        text = judge.format_table([row(), row(fault="acc-cut", broker="3.10.8/mnesia", restarted=["b3"])])
        lines = text.splitlines()
        self.assertTrue(lines[1].startswith("fault"))
        self.assertIn("broker", lines[1])
        self.assertIn("4.0.5/khepri", lines[2])
        self.assertTrue(lines[2].endswith("OK (check 0, files ok)"))
        self.assertIn("3.10.8/mnesia", lines[3])
        self.assertTrue(lines[3].endswith("OK (check 0, files ok, restarted b3)"))
        self.assertEqual(lines[-1], "  acc-cut: b3")
        self.assertEqual(len(lines[1].split()), len(judge.COLUMNS))


class ParseTest(unittest.TestCase):
    BENCH = ('create errors  code14=3 code4=1; retried 2\n'
             '{"label":"pay-cut","create_ok":9000,"create_failed":4,"create_skipped":0.0}\n')

    def test_bench_figures_and_error_codes(self):
        self.assertEqual(judge.json_figure(self.BENCH, "create_failed"), 4)
        self.assertEqual(judge.json_figure(self.BENCH, "create_skipped"), 0)
        self.assertIsNone(judge.json_figure(self.BENCH, "absent"))
        self.assertEqual(judge.error_codes(self.BENCH), "code14=3,code4=1")
        self.assertEqual(judge.error_codes("no errors\n"), "-")

    def test_claims_are_the_republish_events_of_an_instance_log(self):
        lines = [
            "2026-01-01T00:00:00Z I message_republished message_id=m1 attempt=2 payment_id=p1\n",
            "2026-01-01T00:00:00Z W message_republish_failed message_id=m2 attempt=3\n",
            "2026-01-01T00:00:00Z I lease_acquired holder=rec1 message_id=m3 attempt=9\n",
            "short line\n",
        ]
        self.assertEqual(judge.claims_in_log(lines, "rec2"), [("rec2", "m1", 2), ("rec2", "m2", 3)])

    def test_refusals_are_the_create_payment_failed_events_of_payments_log(self):
        lines = [
            '2026-01-01T00:00:00Z error create_payment_failed idempotency_key=k1 error="lost"\n',
            "2026-01-01T00:00:00Z error create_payment_failed idempotency_key=k2\n",
            "2026-01-01T00:00:00Z info payment_created error=create_payment_failed\n",
            "\n",
        ]
        self.assertEqual(judge.refusals_in_log(lines), 2)
        self.assertEqual(judge.refusals_in_log([]), 0)

    def test_metric_sums_every_sample_of_the_name_only(self):
        page = ("# HELP outbox_alerts_active x\n"
                'outbox_alerts_active{alert="a"} 1\noutbox_alerts_active{alert="b"} 2\n'
                "outbox_alerts_active_total 7\noutbox_duplicates_total 5\n")
        self.assertEqual(judge.metric_sum(page, "outbox_alerts_active"), 3)
        self.assertEqual(judge.metric_sum(page, "outbox_duplicates_total"), 5)
        self.assertEqual(judge.metric_sum("", "outbox_duplicates_total"), 0)

    def test_node_view(self):
        self.assertEqual(judge.node_view("{3,[]}"), (3, []))
        self.assertEqual(judge.node_view("{2,['rabbit@b3']}\n"), (2, ["rabbit@b3"]))
        self.assertIsNone(judge.node_view(""))
        self.assertIsNone(judge.node_view("Error: unable to perform an operation on node"))
        self.assertTrue(judge.is_whole(judge.node_view("{3,[]}")))
        self.assertFalse(judge.is_whole(judge.node_view("{3,[rabbit@b2]}")))
        self.assertFalse(judge.is_whole(None))

    def test_quorum_members_online(self):
        answer = ('[{"name":"PAY_QUEUE","type":"quorum","members":["rabbit@b1","rabbit@b2","rabbit@b3"],'
                  '"online":["rabbit@b1","rabbit@b2"]},'
                  '{"name":"ACC_QUEUE","type":"quorum","members":["rabbit@b1","rabbit@b2","rabbit@b3"],'
                  '"online":["rabbit@b1","rabbit@b3"]},'
                  '{"name":"amq.gen","type":"classic","online":[]}]')
        self.assertEqual(judge.fewest_online(answer), 2)
        self.assertIn(judge.most_offline_node(answer), ("b2", "b3"))
        self.assertIsNone(judge.fewest_online("Error"))
        whole = '[{"name":"Q","type":"quorum","members":["rabbit@b1"],"online":["rabbit@b1"]}]'
        self.assertIsNone(judge.most_offline_node(whole))

    def test_queue_leader(self):
        text = "ACC_QUEUE\trabbit@b2\nPAY_QUEUE\trabbit@b3\n"
        self.assertEqual(judge.queue_leader(text, "PAY_QUEUE"), "b3")
        self.assertIsNone(judge.queue_leader(text, "OTHER"))

    def test_heal_seconds(self):
        self.assertEqual(judge.heal_seconds(12_345, 10_000), "2.3")
        self.assertEqual(judge.heal_seconds(9_000, 10_000), "0.0")


if __name__ == "__main__":
    unittest.main()

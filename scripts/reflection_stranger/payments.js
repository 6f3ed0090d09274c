// The stranger makes payments: a Node client with none of our protos learns
// payment.v1.PaymentService through server reflection and creates COUNT
// payments at the first address given, without knowing how keys map to
// shards. A shard that does not own a key answers FAILED_PRECONDITION with
// the owner's address in the trailing metadata (outbox-payment-shard-address);
// the stranger follows it once. Then it polls GetPayment until every payment
// is SENT (TIMEOUT_S), and, with more than one shard, asks the wrong shard
// for one of them (FAILED_PRECONDITION with the right address expected).
// Prints one line per step; exit 0 only if all of that held.
//   node payments.js COUNT HOST:PORT[,HOST:PORT...]
// Env: STRANGER_TLS_CA_FILE, STRANGER_TOKEN_FILE (credentials.js),
// STRANGER_TIMEOUT_S (120), STRANGER_RUN (the keys' prefix; default the time).
'use strict';
const grpc = require('@grpc/grpc-js');
const { GrpcReflection } = require('grpc-js-reflection-client');
const { channelCredentials } = require('./credentials');

const SERVICE = 'payment.v1.PaymentService';
const loaderOptions = { keepCase: true, longs: String, enums: String, defaults: true };
const clients = new Map();

function unary(Client, addr, method, request) {
  if (!clients.has(addr)) clients.set(addr, new Client(addr, channelCredentials()));
  return new Promise((resolve) => {
    clients.get(addr)[method](request, { deadline: Date.now() + 10000 }, (err, resp) => resolve({ err, resp }));
  });
}

function shardAddress(err) {
  const v = err && err.metadata ? err.metadata.get('outbox-payment-shard-address') : [];
  return v.length > 0 ? String(v[0]) : '';
}

async function main() {
  const count = Number(process.argv[2]);
  const addrs = (process.argv[3] || '').split(',').filter((a) => a);
  if (!(count > 0) || addrs.length === 0) {
    console.error('usage: node payments.js COUNT HOST:PORT[,HOST:PORT...]');
    process.exit(2);
  }
  const timeoutMs = 1000 * Number(process.env.STRANGER_TIMEOUT_S || 120);
  const run = process.env.STRANGER_RUN || `${Date.now()}`;

  const reflection = new GrpcReflection(addrs[0], channelCredentials(), {}, 'v1');
  const pkg = (await reflection.getDescriptorBySymbol(SERVICE)).getPackageObject(loaderOptions);
  const Client = SERVICE.split('.').reduce((o, k) => o[k], pkg);
  console.log(`stranger: ${SERVICE} resolved through reflection at ${addrs[0]}`);

  const payments = [];  // { id, addr }
  let redirected = 0;
  let firstRedirect = '';
  for (let i = 0; i < count; i++) {
    const request = {
      idempotency_key: `stranger-${run}-${i}`, payer_account: 'stranger-payer', payee_account: 'stranger-payee',
      amount_minor: String(100 + i), currency: 'EUR', description: 'made by a client without our protos',
    };
    let addr = addrs[0];
    let call = await unary(Client, addr, 'CreatePayment', request);
    if (call.err && call.err.code === grpc.status.FAILED_PRECONDITION && shardAddress(call.err)) {
      redirected++;
      if (!firstRedirect) firstRedirect = `${addr} answered FAILED_PRECONDITION "${call.err.details}" -> ${shardAddress(call.err)}`;
      addr = shardAddress(call.err);
      call = await unary(Client, addr, 'CreatePayment', request);
    }
    if (call.err) throw new Error(`CreatePayment ${request.idempotency_key} at ${addr}: ${grpc.status[call.err.code]} ${call.err.details}`);
    payments.push({ id: call.resp.payment.payment_id, addr });
  }
  const byAddr = {};
  for (const p of payments) byAddr[p.addr] = (byAddr[p.addr] || 0) + 1;
  console.log(`stranger: created ${count} payments: ${Object.entries(byAddr).map(([a, n]) => `${n} at ${a}`).join(', ')}; ` +
              `${redirected} first sent to a shard that does not own the key`);
  if (firstRedirect) console.log(`stranger: e.g. ${firstRedirect}`);

  const start = Date.now();
  let pending = payments;
  while (pending.length > 0) {
    const still = [];
    for (const p of pending) {
      const call = await unary(Client, p.addr, 'GetPayment', { payment_id: p.id });
      if (call.err) throw new Error(`GetPayment ${p.id} at ${p.addr}: ${grpc.status[call.err.code]} ${call.err.details}`);
      const status = call.resp.outbox ? call.resp.outbox.status : '?';
      if (status === 'FAILED') throw new Error(`payment ${p.id} is FAILED`);
      if (status !== 'SENT') still.push(p);
    }
    pending = still;
    if (pending.length === 0) break;
    if (Date.now() - start > timeoutMs) throw new Error(`${pending.length} payment(s) not SENT after ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 500));
  }
  console.log(`stranger: all ${count} payments SENT (GetPayment at their shard)`);

  if (addrs.length > 1) {
    const p = payments[0];
    const wrong = addrs.find((a) => a !== p.addr);
    const call = await unary(Client, wrong, 'GetPayment', { payment_id: p.id });
    const code = call.err ? grpc.status[call.err.code] : 'OK';
    console.log(`stranger: GetPayment ${p.id} at ${wrong} -> ${code} "${call.err ? call.err.details : ''}" ` +
                `(outbox-payment-shard-address: ${shardAddress(call.err) || 'none'})`);
    if (code !== 'FAILED_PRECONDITION' || shardAddress(call.err) !== p.addr) {
      throw new Error(`the wrong shard did not point to ${p.addr}`);
    }
  }
  console.log(`stranger: OK`);
}

main().then(() => process.exit(0), (err) => {
  console.error(`stranger: FAILED: ${err.message || err}`);
  process.exit(1);
});

// The stranger's check: a Node client with none of this project's protos
// (grpc-js + grpc-js-reflection-client, a third party's reflection client).
// For each address and each reflection version (v1, v1alpha) it lists the
// services, resolves every one to a file descriptor, builds a client from
// what reflection returned and calls grpc.health.v1.Health/Check, and for a
// service of ours calls one method (a lookup of an id that does not exist,
// which must answer NOT_FOUND). Prints one line per step; exits 1 on the
// first failure.
//   node check.js 127.0.0.1:50051 127.0.0.1:50052 127.0.0.1:50053
'use strict';
const grpc = require('@grpc/grpc-js');
const { GrpcReflection } = require('grpc-js-reflection-client');
const { channelCredentials } = require('./credentials');

// Plaintext, or TLS and a token from STRANGER_TLS_CA_FILE / STRANGER_TOKEN_FILE.
const credentials = channelCredentials;
const loaderOptions = { keepCase: true, longs: String, enums: String, defaults: true };

// Our own services and a call each that needs no data: NOT_FOUND expected.
const probes = {
  'payment.v1.PaymentService': ['GetPayment', { payment_id: 'no-such-payment' }],
  'accounting.v1.AccountingService': ['GetVoucher', { payment_id: 'no-such-payment' }],
  'ops.v1.OutboxOps': ['GetMessage', { message_id: 'no-such-message' }],
};

function lookup(pkg, fullName) {
  return fullName.split('.').reduce((o, k) => (o ? o[k] : undefined), pkg);
}

function unary(client, method, request) {
  return new Promise((resolve) => {
    client[method](request, { deadline: Date.now() + 5000 }, (err, resp) => resolve({ err, resp }));
  });
}

async function checkServer(addr, version) {
  const reflection = new GrpcReflection(addr, credentials(), {}, version);
  const services = await reflection.listServices();
  console.log(`${addr} ${version}: list_services -> ${services.join(', ')}`);
  if (!services.includes('grpc.health.v1.Health')) throw new Error('grpc.health.v1.Health is not listed');
  for (const name of services) {
    const descriptor = await reflection.getDescriptorBySymbol(name);
    const service = descriptor.getProtobufJsRoot().lookupService(name);
    console.log(`${addr} ${version}: file_containing_symbol ${name} -> ` +
                `${Object.keys(service.methods).length} method(s): ${Object.keys(service.methods).join(', ')}`);
  }

  const health = (await reflection.getDescriptorBySymbol('grpc.health.v1.Health')).getPackageObject(loaderOptions);
  const Health = lookup(health, 'grpc.health.v1.Health');
  const check = await unary(new Health(addr, credentials()), 'Check', { service: '' });
  if (check.err) throw new Error(`Health/Check: ${check.err.message}`);
  console.log(`${addr} ${version}: grpc.health.v1.Health/Check -> ${check.resp.status}`);
  if (check.resp.status !== 'SERVING') throw new Error(`Health/Check answered ${check.resp.status}`);

  for (const name of services.filter((s) => probes[s])) {
    const [method, request] = probes[name];
    const pkg = (await reflection.getDescriptorBySymbol(name)).getPackageObject(loaderOptions);
    const Client = lookup(pkg, name);
    const call = await unary(new Client(addr, credentials()), method, request);
    const code = call.err ? grpc.status[call.err.code] : 'OK';
    console.log(`${addr} ${version}: ${name}/${method} ${JSON.stringify(request)} -> ${code}`);
    if (code !== 'NOT_FOUND') throw new Error(`${name}/${method} answered ${code}, expected NOT_FOUND`);
  }
}

async function main() {
  const addrs = process.argv.slice(2);
  if (addrs.length === 0) {
    console.error('usage: node check.js HOST:PORT...');
    process.exit(2);
  }
  for (const addr of addrs) {
    for (const version of ['v1', 'v1alpha']) await checkServer(addr, version);
  }
  console.log(`reflection_stranger: OK (${addrs.length} server(s), reflection v1 and v1alpha)`);
}

main().then(() => process.exit(0), (err) => {
  console.error(`reflection_stranger: FAILED: ${err.message || err}`);
  process.exit(1);
});

// Channel credentials for the stranger's clients: plaintext by default (the
// private services of reflection_stranger.sh); TLS trusting
// STRANGER_TLS_CA_FILE, with STRANGER_TOKEN_FILE's bearer token on every call,
// when those are set (the docker-compose services: certs/compose/ca.pem and
// api.token). Health and reflection need no token; the API does.
'use strict';
const fs = require('fs');
const grpc = require('@grpc/grpc-js');

function channelCredentials() {
  const ca = process.env.STRANGER_TLS_CA_FILE;
  if (!ca) return grpc.credentials.createInsecure();
  const tls = grpc.credentials.createSsl(fs.readFileSync(ca));
  const tokenFile = process.env.STRANGER_TOKEN_FILE;
  if (!tokenFile) return tls;
  const token = fs.readFileSync(tokenFile, 'utf8').trim();
  const bearer = grpc.credentials.createFromMetadataGenerator((_params, callback) => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    callback(null, md);
  });
  return grpc.credentials.combineChannelCredentials(tls, bearer);
}

module.exports = { channelCredentials };

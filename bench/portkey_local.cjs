// portkey_local.cjs: preloaded (node --require) by bench/proxies.sh into the
// Portkey gateway, whose start-server.js takes a port but no address and so
// listens on every interface. This makes a listen() given only a port bind
// 127.0.0.1, as every other server of the benchmarks does.
'use strict';
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && (args.length === 1 || args[1] === undefined || typeof args[1] === 'function')) {
    if (args[1] === undefined && args.length > 1) args[1] = '127.0.0.1';
    else args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};

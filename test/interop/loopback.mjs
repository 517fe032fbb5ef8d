// loopback.mjs is preloaded (node --import) into server-everything, whose Express app calls
// listen(PORT) and so binds every interface. Tests stay on loopback: a listen call that names
// a port but no host gets host 127.0.0.1.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
    const portOnly = (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) &&
        (args.length === 1 || typeof args[1] === 'function');
    if (portOnly) {
        args.splice(1, 0, '127.0.0.1');
    }
    return listen.apply(this, args);
};

// Preloaded into a Node server (node --require print_port.cjs ...): once an HTTP server listens, print
// "PORT <n>" on stdout, so a server started with PORT=0 tells the tests which port the kernel picked.
const http = require("node:http");
const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function (...args) {
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") process.stdout.write(`PORT ${address.port}\n`);
  });
  return listen.apply(this, args);
};

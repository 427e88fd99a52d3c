// What both HTTP servers (serve() and the Lambda adapter) share: reading a
// request's body, and listening on HOST:PORT with the line Cairn's tools
// wait for ("listening on HOST:PORT").

import * as http from "node:http";

export function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** Listens on `listen` (HOST:PORT; port 0 picks one) and prints where. */
export function listenOn(server: http.Server, listen: string): void {
  const colon = listen.lastIndexOf(":");
  server.listen(Number(listen.slice(colon + 1)), listen.slice(0, colon), () => {
    const a = server.address();
    if (a && typeof a === "object") console.log(`listening on ${a.address}:${a.port}`);
  });
}

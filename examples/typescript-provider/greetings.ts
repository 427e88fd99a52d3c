// Custom::Greeting on Cairn's TypeScript SDK: the provider of
// examples/webhook_handler.rs and examples/python-provider/greetings.py,
// in TypeScript. `Name` (CreateOnly: a new name is a new greeting),
// `Excited` (Boolean, in place); attribute `Message`; drift against what it
// holds (in memory: a restart forgets every greeting).
//
//   npm ci && npm run build
//   node dist/greetings.js --listen 127.0.0.1:8083 --secret s3cret
//   cairn provider test --webhook http://127.0.0.1:8083/ --secret s3cret --drift --read

import { NotFound, Provider, Request, ResourceType, boolean, compare, deleted, found, serve, string } from "cairn-provider";

const GREETING = new ResourceType("Custom::Greeting", {
  properties: { Name: string({ required: true, createOnly: true }), Excited: boolean() },
  attributes: { Message: "the greeting" },
});

const PREFIX = "ts-greeting-";
const made = new Map<string, string>();

const message = (r: Request) => `Hello, ${String(r.properties.Name)}${r.properties.Excited ? "!" : "."}`;

function make(r: Request) {
  const id = PREFIX + String(r.properties.Name);
  made.set(id, message(r));
  return { physicalId: id, attributes: { Message: made.get(id) } };
}

const greetings: Provider = {
  types: [GREETING],
  create: make,
  update: make,
  delete: (r) => void made.delete(r.physicalId ?? ""),
  checkDrift: (r) => {
    const held = made.get(r.physicalId ?? "");
    return held === undefined ? deleted() : compare({ Message: message(r) }, { Message: held });
  },
  read: (r) => {
    const held = made.get(r.physicalId ?? "");
    if (held === undefined || !r.physicalId?.startsWith(PREFIX)) throw new NotFound(`no greeting ${r.physicalId}`);
    return found({ Name: r.physicalId.slice(PREFIX.length), Excited: held.endsWith("!") }, { Message: held });
  },
};

serve(greetings);

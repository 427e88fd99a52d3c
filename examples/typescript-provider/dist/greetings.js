"use strict";
// Custom::Greeting on Cairn's TypeScript SDK: the provider of
// examples/webhook_handler.rs and examples/python-provider/greetings.py,
// in TypeScript. `Name` (CreateOnly: a new name is a new greeting),
// `Excited` (Boolean, in place); attribute `Message`; drift against what it
// holds (in memory: a restart forgets every greeting).
//
//   npm ci && npm run build
//   node dist/greetings.js --listen 127.0.0.1:8083 --secret s3cret
//   cairn provider test --webhook http://127.0.0.1:8083/ --secret s3cret --drift --read
Object.defineProperty(exports, "__esModule", { value: true });
const cairn_provider_1 = require("cairn-provider");
const GREETING = new cairn_provider_1.ResourceType("Custom::Greeting", {
    properties: { Name: (0, cairn_provider_1.string)({ required: true, createOnly: true }), Excited: (0, cairn_provider_1.boolean)() },
    attributes: { Message: "the greeting" },
});
const PREFIX = "ts-greeting-";
const made = new Map();
const message = (r) => `Hello, ${String(r.properties.Name)}${r.properties.Excited ? "!" : "."}`;
function make(r) {
    const id = PREFIX + String(r.properties.Name);
    made.set(id, message(r));
    return { physicalId: id, attributes: { Message: made.get(id) } };
}
const greetings = {
    types: [GREETING],
    create: make,
    update: make,
    delete: (r) => void made.delete(r.physicalId ?? ""),
    checkDrift: (r) => {
        const held = made.get(r.physicalId ?? "");
        return held === undefined ? (0, cairn_provider_1.deleted)() : (0, cairn_provider_1.compare)({ Message: message(r) }, { Message: held });
    },
    read: (r) => {
        const held = made.get(r.physicalId ?? "");
        if (held === undefined || !r.physicalId?.startsWith(PREFIX))
            throw new cairn_provider_1.NotFound(`no greeting ${r.physicalId}`);
        return (0, cairn_provider_1.found)({ Name: r.physicalId.slice(PREFIX.length), Excited: held.endsWith("!") }, { Message: held });
    },
};
(0, cairn_provider_1.serve)(greetings);

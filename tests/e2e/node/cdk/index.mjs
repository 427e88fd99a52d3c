// A CDK provider-framework handler pair: onEvent starts a "job" (a file
// in JOBS_DIR), isComplete polls it. A job is ready on the third poll; its
// Data then carries the poll count. Each call is logged in calls.jsonl.
// An ES module (index.mjs), as Lambda's Node.js runtimes load them.
import fs from "node:fs";
import path from "node:path";

const jobs = () => process.env.JOBS_DIR;
const log = (what, event) =>
  fs.appendFileSync(
    path.join(jobs(), "calls.jsonl"),
    JSON.stringify({ what, RequestType: event.RequestType, PhysicalResourceId: event.PhysicalResourceId, HasResponseURL: "ResponseURL" in event }) + "\n",
  );

export const onEvent = async (event) => {
  log("onEvent", event);
  const props = event.ResourceProperties;
  if (props.Fail === event.RequestType.toLowerCase()) {
    throw new Error("the job could not start: told to fail on " + event.RequestType.toLowerCase());
  }
  if (event.RequestType === "Delete") {
    fs.rmSync(path.join(jobs(), event.PhysicalResourceId), { force: true });
    return {};
  }
  const id = "job-" + props.Name;
  fs.writeFileSync(path.join(jobs(), id), "0");
  return { PhysicalResourceId: id, Data: { Name: props.Name } };
};

export const isComplete = async (event) => {
  log("isComplete", event);
  if (event.RequestType === "Delete") return { IsComplete: true };
  const file = path.join(jobs(), event.PhysicalResourceId);
  const polls = Number(fs.readFileSync(file, "utf8")) + 1;
  fs.writeFileSync(file, String(polls));
  if (polls < 3) return { IsComplete: false };
  return { IsComplete: true, Data: { Polls: String(polls) } };
};

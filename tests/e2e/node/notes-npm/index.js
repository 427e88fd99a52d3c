// The notes handler (see ../../cfnresponse_notes.py) as an async Node.js
// Lambda function using npm's cfn-response package.
const fs = require("fs/promises");
const path = require("path");
const response = require("cfn-response");

exports.handler = async (event, context) => {
  const props = event.ResourceProperties;
  const notes = process.env.NOTES_DIR;
  try {
    if (event.RequestType === "Delete") {
      const id = event.PhysicalResourceId;
      if (id.startsWith("note-")) await fs.rm(path.join(notes, id.slice("note-".length)), { force: true });
      return response.send(event, context, response.SUCCESS, {}, id);
    }
    if (props.Fail === event.RequestType.toLowerCase()) {
      throw new Error("told to fail on " + event.RequestType.toLowerCase());
    }
    await fs.writeFile(path.join(notes, props.Name), props.Text || "");
    const data = { Text: props.Text || "" };
    if (event.RequestType === "Update") data.Old = event.OldResourceProperties.Text || "";
    return response.send(event, context, response.SUCCESS, data, "note-" + props.Name);
  } catch (e) {
    console.log(e.message);
    return response.send(event, context, response.FAILED, {}, event.PhysicalResourceId);
  }
};

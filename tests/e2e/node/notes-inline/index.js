// The notes handler (see ../../cfnresponse_notes.py) as a ZipFile inline
// function: callback style, AWS's inline `cfn-response` module (no
// node_modules here: the adapter provides it, as Lambda does).
const fs = require("fs");
const path = require("path");
const response = require("cfn-response");

exports.handler = function (event, context) {
  const props = event.ResourceProperties;
  const notes = process.env.NOTES_DIR;
  // A handler that throws before it answers (the adapter answers for it).
  if (props.Fail === "throw-" + event.RequestType.toLowerCase()) {
    throw new Error("told to throw on " + event.RequestType.toLowerCase());
  }
  try {
    if (event.RequestType === "Delete") {
      const id = event.PhysicalResourceId;
      const file = path.join(notes, id.slice("note-".length));
      if (id.startsWith("note-") && fs.existsSync(file)) fs.unlinkSync(file);
      response.send(event, context, response.SUCCESS, {}, id);
      return;
    }
    if (props.Fail === event.RequestType.toLowerCase()) {
      throw new Error("told to fail on " + event.RequestType.toLowerCase());
    }
    fs.writeFileSync(path.join(notes, props.Name), props.Text || "");
    const data = { Text: props.Text || "" };
    if (event.RequestType === "Update") data.Old = event.OldResourceProperties.Text || "";
    response.send(event, context, response.SUCCESS, data, "note-" + props.Name);
  } catch (e) {
    console.log(e.message);
    response.send(event, context, response.FAILED, {}, event.PhysicalResourceId);
  }
};

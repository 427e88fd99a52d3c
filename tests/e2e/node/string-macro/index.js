// A macro Lambda as AWS's StringFunctions sample writes it, in Node.js:
// unchanged, it returns CloudFormation's macro response itself. An
// operation it does not know is its failure; "Throw" throws, as a broken
// macro would.
exports.handler = async (event) => {
  const params = event.params || {};
  const input = params.InputString !== undefined ? params.InputString : event.fragment;
  switch (params.Operation) {
    case "Upper":
      return { requestId: event.requestId, status: "success", fragment: String(input).toUpperCase() };
    case "Lower":
      return { requestId: event.requestId, status: "success", fragment: String(input).toLowerCase() };
    case "Replace":
      return {
        requestId: event.requestId,
        status: "success",
        fragment: String(input).split(params.Old).join(params.New),
      };
    case "Throw":
      throw new TypeError("cannot read the input");
    default:
      return { requestId: event.requestId, status: "failure", errorMessage: `unknown operation ${params.Operation}` };
  }
};

"""Resource types and their properties, as Cairn's schema (`GET /schema`)
describes them, and the coercion of CloudFormation's stringified property
values back to the declared types."""

MUTABLE = "Mutable"
MUTABLE_WITH_INTERRUPTION = "MutableWithInterruption"
CREATE_ONLY = "CreateOnly"
IMMUTABLE = "Immutable"


class Property:
    """One property: its type, whether it is required, and what an update of
    it does (`create_only=True`: a new physical resource; `immutable=True`:
    the update fails)."""

    type_name = "Json"

    def __init__(self, required=False, create_only=False, immutable=False,
                 interrupts=False, description="", allowed=None):
        self.required = required
        if create_only:
            self.update = CREATE_ONLY
        elif immutable:
            self.update = IMMUTABLE
        elif interrupts:
            self.update = MUTABLE_WITH_INTERRUPTION
        else:
            self.update = MUTABLE
        self.description = description
        self.allowed = list(allowed or [])

    def type_schema(self):
        return {"Type": self.type_name}

    def schema(self):
        s = self.type_schema()
        s.update({"Required": self.required, "Update": self.update})
        if self.description:
            s["Description"] = self.description
        if self.allowed:
            s["AllowedValues"] = self.allowed
        return s

    def coerce(self, value, path):
        return value


def _refuse(path, expected, value):
    from .errors import InvalidRequest
    raise InvalidRequest("#%s: expected type: %s, found: %r" % (path, expected, value))


class String(Property):
    type_name = "String"

    def coerce(self, value, path):
        if isinstance(value, (dict, list)):
            _refuse(path, "String", value)
        return value if isinstance(value, str) else str(value)


class Integer(Property):
    type_name = "Integer"

    def coerce(self, value, path):
        try:
            if isinstance(value, bool):
                raise ValueError
            return int(value)
        except (TypeError, ValueError):
            _refuse(path, "Integer", value)


class Number(Property):
    type_name = "Number"

    def coerce(self, value, path):
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
        except (TypeError, ValueError):
            _refuse(path, "Number", value)
        return int(number) if number.is_integer() and "." not in str(value) else number


class Boolean(Property):
    type_name = "Boolean"

    def coerce(self, value, path):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        _refuse(path, "Boolean", value)


class Json(Property):
    type_name = "Json"


class List(Property):
    type_name = "List"

    def __init__(self, items=None, **kwargs):
        super().__init__(**kwargs)
        self.items = items or Json()

    def type_schema(self):
        return {"Type": "List", "Items": self.items.type_schema()}

    def coerce(self, value, path):
        if not isinstance(value, list):
            _refuse(path, "JSONArray", value)
        return [self.items.coerce(v, "%s/%d" % (path, i)) for i, v in enumerate(value)]


class Map(Property):
    type_name = "Map"

    def __init__(self, values=None, **kwargs):
        super().__init__(**kwargs)
        self.values = values or Json()

    def type_schema(self):
        return {"Type": "Map", "Items": self.values.type_schema()}

    def coerce(self, value, path):
        if not isinstance(value, dict):
            _refuse(path, "JSONObject", value)
        return {k: self.values.coerce(v, "%s/%s" % (path, k)) for k, v in value.items()}


class ResourceType:
    """A resource type: its name, properties, attributes (name ->
    description) and what `Ref` returns."""

    def __init__(self, name, properties=None, attributes=None, description="",
                 additional_properties=False, ref_returns="the physical resource id",
                 required_capabilities=None, taggable=False, primary_identifier=None):
        self.name = name
        # The properties (or attributes) whose values make the physical id:
        # what an import names the resource by.
        self.primary_identifier = list(primary_identifier or [])
        # Applies the stack's tags: called when only they change.
        self.taggable = taggable
        # Capabilities a stack must acknowledge to make one (CAPABILITY_...).
        self.required_capabilities = list(required_capabilities or [])
        self.properties = dict(properties or {})
        self.attributes = dict(attributes or {})
        self.description = description
        self.additional_properties = additional_properties
        self.ref_returns = ref_returns

    def schema(self):
        return {
            "TypeName": self.name,
            "Description": self.description,
            "Properties": {n: p.schema() for n, p in self.properties.items()},
            "AdditionalProperties": self.additional_properties,
            "Attributes": {n: {"Description": d} for n, d in self.attributes.items()},
            "RefReturns": self.ref_returns,
            **({"RequiredCapabilities": self.required_capabilities} if self.required_capabilities else {}),
            **({"Taggable": True} if self.taggable else {}),
            **({"PrimaryIdentifier": self.primary_identifier} if self.primary_identifier else {}),
        }

    def coerce(self, properties):
        """The request's (stringified) properties as the declared types."""
        out = {}
        for name, value in (properties or {}).items():
            if name in ("ServiceToken", "ServiceTimeout"):
                continue
            p = self.properties.get(name)
            out[name] = p.coerce(value, "/" + name) if p else value
        return out

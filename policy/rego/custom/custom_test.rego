package sandboxd.custom_test

import data.sandboxd.custom
import rego.v1

# The embedded policy adds no custom reasons; admin files do.
test_embedded_adds_nothing[kind] if {
	some kind in ["deny", "ask"]
	count(object.get(custom, kind, set())) == 0 with input as {}
}

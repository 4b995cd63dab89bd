# Hook points for admin policy. Files in the policy directory (/etc/sandboxd/policy.d/*.rego)
# must use this package (or one below it) and may add:
#
#   deny contains reason if { ... }   # deny the call, whatever the rules or mode say
#   ask contains reason if { ... }    # ask a person (never auto-approved), unless denied
#
# with the same input the rest of the policy sees. The decision chain only reads these two
# sets, so nothing written here can allow a call. The embedded policy adds no reasons.
package sandboxd.custom

// Package subid finds whose subordinate id range (/etc/subuid, /etc/subgid) holds an id.
package subid

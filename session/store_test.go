package session

import (
	"strings"
	"testing"
)

// TestGetHoldsTheCreatorsGroups: a session runs with the groups of the process that made it;
// a later process of its owner lacking one of them (dropped, or the user left the group) is
// refused with why, not given it back. More groups, root, and admins are not held to them.
func TestGetHoldsTheCreatorsGroups(t *testing.T) {
	st := NewStore()
	owner := Caller{UID: 1000, GID: 1000, Groups: []uint32{1000, 27, 44}}
	s := st.Create(owner, Params{Cwd: "/home/u"})
	for _, tc := range []struct {
		caller Caller
		ok     bool
	}{
		{owner, true},
		{Caller{UID: 1000, GID: 1000, Groups: []uint32{44, 27, 1000, 5}}, true},
		{Caller{UID: 1000, GID: 1000, Groups: []uint32{1000}}, false},
		{Caller{UID: 1000, GID: 27, Groups: []uint32{27, 44}}, false},
		{Caller{UID: 0, GID: 0}, true},
		{Caller{UID: 1001, GID: 1001, Groups: []uint32{1000, 27, 44}}, false},
	} {
		_, err := st.Get(tc.caller, s.ID)
		if (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok %v", tc.caller, err, tc.ok)
		}
		if err != nil && tc.caller.UID == owner.UID && !strings.Contains(err.Error(), "group") {
			t.Errorf("%+v: refused without saying why: %v", tc.caller, err)
		}
	}
}

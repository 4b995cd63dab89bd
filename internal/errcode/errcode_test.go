package errcode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

func TestOf(t *testing.T) {
	_, statErr := os.Stat("/nonexistent/x")
	cases := []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, OK},
		{"typed", New(Validation, errors.New("x")), Validation},
		{"wrapped typed", fmt.Errorf("ctx: %w", Msg(OOM, "x")), OOM},
		{"deadline", context.DeadlineExceeded, Timeout},
		{"cancel", fmt.Errorf("x: %w", context.Canceled), Cancelled},
		{"errno", syscall.EACCES, ErrnoEACCES},
		{"path error", statErr, ErrnoENOENT},
		{"fs sentinel", fs.ErrPermission, ErrnoEACCES},
		{"plain", errors.New("something"), Internal},
	}
	for _, tc := range cases {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("%s: Of = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A code that crossed the worker boundary still matches the fs sentinels.
func TestErrnoCodesMatchFSSentinels(t *testing.T) {
	if !errors.Is(Msg(ErrnoENOENT, "gone"), fs.ErrNotExist) {
		t.Error("ENOENT code is not fs.ErrNotExist")
	}
	if !errors.Is(fmt.Errorf("read: %w", Msg(ErrnoEACCES, "no")), fs.ErrPermission) {
		t.Error("EACCES code is not fs.ErrPermission")
	}
	if errors.Is(Msg(Validation, "x"), fs.ErrNotExist) {
		t.Error("validation matched fs.ErrNotExist")
	}
}

package protocol

import (
	"testing"
	"time"
)

// The docs ask the log about the last week as --since 7d: days and weeks are durations too.
func TestParseTime(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		in   string
		back time.Duration
	}{
		{"90m", 90 * time.Minute},
		{"24h", 24 * time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"1d", 24 * time.Hour},
		{"2w", 14 * 24 * time.Hour},
	} {
		got, err := ParseTime(c.in)
		// AddDate counts calendar days: a daylight-saving change moves it by an hour.
		if diff := now.Add(-c.back).Sub(got); err != nil || diff < -time.Hour-time.Minute || diff > time.Hour+time.Minute {
			t.Errorf("ParseTime(%q) = %v, %v; want about %s ago", c.in, got, err, c.back)
		}
	}
	if got, err := ParseTime("2026-01-02T03:04:05Z"); err != nil || !got.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("RFC 3339: %v %v", got, err)
	}
	for _, bad := range []string{"d", "7dw", "-7d", "7x", "7.5d", "yesterday", "99999999d"} {
		if _, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) took it", bad)
		}
	}
}

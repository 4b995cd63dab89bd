package policy

import (
	"context"
)

// BundleConfig configures fleet policy from an OPA bundle server.
type BundleConfig struct{}

type bundleState struct{}

func (b *bundleState) full() bool                                    { return false }
func (b *bundleState) modules() map[string]string                    { return nil }
func (b *bundleState) stop(context.Context)                          {}
func (b *bundleState) logDecision(context.Context, string, any, any) {}
func (e *Engine) startBundle(context.Context) error                  { return nil }

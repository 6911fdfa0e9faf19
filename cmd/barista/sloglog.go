package main

import (
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogOf is an hclog logger as a *slog.Logger, for the packages that log
// through log/slog (the worker agent): the command's log keeps one
// format and one level, whoever writes it.
func slogOf(l hclog.Logger) *slog.Logger { return slog.New(&hclogHandler{l: l}) }

// hclogHandler is a slog.Handler writing to an hclog logger.
type hclogHandler struct {
	l     hclog.Logger
	attrs []any  // key-value pairs of WithAttrs
	group string // prefix of WithGroup ("" or "g.")
}

func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	}
	return hclog.Error
}

func (h *hclogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.l.GetLevel() <= hclogLevel(l)
}

func (h *hclogHandler) Handle(_ context.Context, r slog.Record) error {
	args := append([]any(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, h.group+a.Key, a.Value.Resolve().Any())
		return true
	})
	h.l.Log(hclogLevel(r.Level), r.Message, args...)
	return nil
}

func (h *hclogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := *h
	out.attrs = append([]any(nil), h.attrs...)
	for _, a := range as {
		out.attrs = append(out.attrs, h.group+a.Key, a.Value.Resolve().Any())
	}
	return &out
}

func (h *hclogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	out := *h
	out.group = h.group + name + "."
	return &out
}

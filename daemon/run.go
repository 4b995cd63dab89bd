package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/regfile"
	"github.com/sandboxd/sandboxd/internal/sdnotify"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
)

// Options are the daemon's flags.
type Options struct {
	Socket   string
	StateDir string
	// ConfigPath is read if present; ConfigRequired makes a missing file an error (it was
	// named by flag).
	ConfigPath     string
	ConfigRequired bool
	// Notify, when set, tells the service manager the daemon's state (sdnotify: READY=1,
	// RELOADING=1, STOPPING=1).
	Notify func(state string) error
}

// Daemon is a running sandboxd.
type Daemon struct {
	opts   Options
	log    *zap.Logger
	core   *Core
	audit  *audit.Log
	server *http.Server
	api    *api.Server
	// cgLock holds the host-wide lock on the cgroup subtree name until the daemon exits.
	cgLock *cgroupLock
	// stateLock holds the state directory (lockStateDir) until the daemon exits.
	stateLock *os.File
	// metrics is the optional Prometheus listener (metrics.listen); nil when off.
	metrics *metricsEndpoint
}

// New builds the daemon: state directory, sandbox, audit log, policy, tools, API.
func New(opts Options, log *zap.Logger) (d *Daemon, err error) {
	cfg, err := config.Load(opts.ConfigPath, opts.ConfigRequired)
	if err != nil {
		return nil, err
	}
	if err := prepareStateDir(opts.StateDir); err != nil {
		return nil, err
	}
	if err := raiseOpenFiles(uint64(max(cfg.Sandbox.OpenFilesMax, minOpenFiles))); err != nil {
		return nil, err
	}
	// Undo what was built, newest first, if a later step fails.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	stateLock, err := lockStateDir(opts.StateDir)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { stateLock.Close() })
	if n, err := removeLeftoverResults(opts.StateDir); err != nil {
		log.Warn("remove the results of sessions from before this start", zap.Error(err))
	} else if n > 0 {
		log.Info("removed the persisted results of sessions from before this start", zap.Int("sessions", n))
	}
	cgLock, err := lockCgroupName(cfg.Sandbox.CgroupName)
	if err != nil {
		return nil, err
	}
	undo = append(undo, cgLock.Release)
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	steps := newStepTimes(promReg)
	sb, err := sandbox.New(sandbox.Config{
		CgroupRoot: cfg.Sandbox.CgroupName,
		Limits: sandbox.Limits{
			MemoryMaxBytes: cfg.Sandbox.MemoryMaxBytes, PidsMax: cfg.Sandbox.PidsMax, CPUQuotaMilli: cfg.Sandbox.CPUQuotaMilli,
			FileSizeMaxBytes: cfg.Sandbox.FileSizeMaxBytes, OpenFilesMax: cfg.Sandbox.OpenFilesMax, TmpSizeBytes: cfg.Sandbox.TmpSizeBytes,
		},
		UserLimits:    sandbox.UserLimits{MemoryMaxBytes: cfg.Limits.UserMemoryBytes, PidsMax: cfg.Limits.UserPids},
		ExtraSyscalls: cfg.Sandbox.ExtraSyscalls,
		StepObserver:  steps.spawnStep,
		JournalDir:    filepath.Join(opts.StateDir, journalDirName),
	}, log)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	// A refused start leaves no cgroup subtree behind, as a clean stop leaves none.
	undo = append(undo, func() { sb.Close(); _ = sb.RemoveCgroups() })
	al, err := audit.Open(audit.Config{
		Dir: filepath.Join(opts.StateDir, "audit"),
		// Beside the log, not in it: a copy of the log directory (for verify, a backup, an
		// auditor) must not carry the key that could re-sign a rewritten log.
		KeyDir:              filepath.Join(opts.StateDir, "audit-key"),
		MaxFileBytes:        cfg.Audit.MaxFileBytes,
		MaxFileAge:          config.Duration(cfg.Audit.MaxFileAgeSec),
		Retain:              cfg.Audit.RetainFiles,
		CheckpointEvery:     cfg.Audit.CheckpointEvery,
		CheckpointInterval:  config.Duration(cfg.Audit.CheckpointInterval),
		SyslogAddr:          cfg.Audit.Syslog,
		SyslogOCSF:          cfg.Audit.SyslogFormat == "ocsf",
		MinRetainAge:        time.Duration(cfg.Audit.RetainDays) * 24 * time.Hour,
		MaxInputBytes:       cfg.Audit.MaxInputBytes,
		MinFreeBytes:        cfg.Audit.MinFreeBytes,
		MaxBytesPerUserHour: cfg.Audit.MaxBytesPerUserHour,
	}, log)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	undo = append(undo, func() { al.Close() })
	host := executor.NewHost(log, sb, cfg.Sandbox, opts.StateDir)
	host.AuditInputBytes = cfg.Audit.MaxInputBytes
	protected, err := policy.ProtectedPathPattern()
	if err != nil {
		return nil, fmt.Errorf("the embedded policy's protected paths: %w", err)
	}
	host.Protected = protected.MatchString
	undo = append(undo, host.CloseTools)
	reg, err := executor.NewRegistry(executor.BuiltinDefs(host)...)
	if err != nil {
		return nil, err
	}
	host.Tools().Registry = func() []*executor.Tool { return reg.Pool(nil) }
	host.Tools().PersistCwd = func(s *session.Session) bool { return s.PersistCwd }
	hooks, err := executor.NewHooks(host, cfg.Hooks)
	if err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	rec := newRecorder(al, promReg)
	// Admin settings live beside the Rego: when the policy reloads, sessions' rule sets are
	// rebuilt so a new admin deny applies to sessions already open.
	var built atomic.Pointer[Core]
	pcfg, err := policyConfig(cfg, rec, log, func(ev policy.ReloadEvent) {
		c := built.Load()
		if c == nil {
			return // the start's load: New fails if it does
		}
		c.reloads.record(&c.reloads.policy, ev.Err)
		if ev.Err == nil {
			err := c.checkAdminSettings()
			if err != nil {
				log.Error("admin settings refused: every new session is refused and open ones are suspended until they load", zap.Error(err))
			}
			c.reloads.record(&c.reloads.rules, err)
			go c.reloadRules()
		}
	})
	if err != nil {
		return nil, err
	}
	engine, err := policy.New(context.Background(), pcfg, log)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	undo = append(undo, func() { _ = engine.Close() }) // its watcher would go on reloading
	core := &Core{
		log: log.Named("daemon"), ids: newIdentities(cfg.AdminGroup), store: session.NewStore(),
		host: host, sandbox: sb, recorder: rec, policy: engine, started: time.Now(),
	}
	core.cfg.Store(&cfg)
	// A daemon whose admin settings do not load would refuse every session while it says it
	// is up: refused at start, as a policy that does not compile is.
	if err := core.checkAdminSettings(); err != nil {
		return nil, fmt.Errorf("policy_dir: admin settings: %w", err)
	}
	ops := newOpsMetrics(promReg, core, al)
	core.pipeline = executor.NewPipeline(log, reg, host, policyDecider{engine: engine, deniedDomain: core.deniedDomain, allowedDomain: core.allowedDomain, cacheDirs: core.cacheDirs,
		domainsDenied: func() bool { return len(core.Config().Network.DeniedDomains) > 0 }}, ops.recorder(rec), hooks)
	core.pipeline.ObserveStages(ops.stages(steps.stage))
	core.approvals = approval.NewQueue()
	core.pipeline.SetApprovals(&executor.Approvals{Queue: core.approvals, TTL: core.approvalTTL})
	core.pipeline.SetAuto(func() config.AutoClassifier { return core.Config().Auto.Classifier })
	core.egress = newEgressProxy(core, &cfg, log)
	host.ProxyPort = cfg.Network.ProxyPort
	host.TaskEnded = func(s *session.Session, id string, res *sandbox.Result, err error) {
		if aerr := rec.taskEnd(context.Background(), s, id, res, err); aerr != nil {
			log.Error("a background task's end could not be written to the audit log", zap.String("task", id), zap.Error(aerr))
		}
	}
	if cfg.Network.TLSIntercept {
		ca, notes, err := loadInterceptCA(opts.StateDir, time.Now())
		if err != nil {
			return nil, fmt.Errorf("network.tls_intercept: %w", err)
		}
		for _, n := range notes {
			log.Warn(n)
		}
		log.Info("egress proxy intercepts TLS", zap.String("ca_sha256", ca.fingerprint), zap.String("bundle", ca.bundlePath))
		core.egress.srv.Intercept = ca.interceptor
		core.egress.caSHA256 = ca.fingerprint
		host.ProxyCA = executor.ProxyCA{Bundle: ca.bundlePath, CA: ca.certPath, JavaStore: ca.javaStore}
		host.SecretDirs = append(host.SecretDirs, ca.keyDir)
	}
	host.WebFetch = executor.WebFetchNet{
		Dial:      core.egress.dial,
		PlainHTTP: func() bool { return core.Config().Network.WebFetchPlainHTTP },
	}
	built.Store(core)

	apiServer := api.NewServer(log, core, cfg.MaxRequestBytes, promReg)
	apiServer.SetTenantOf(core.ids.Tenant)
	d = &Daemon{opts: opts, log: log.Named("daemon"), core: core, audit: al, api: apiServer, cgLock: cgLock, stateLock: stateLock}
	d.server = &http.Server{
		Handler:           apiServer,
		ConnContext:       apiServer.ConnContext,
		ReadHeaderTimeout: config.Duration(cfg.ReadHeaderTimeoutSec),
		ReadTimeout:       config.Duration(cfg.ReadBodyTimeoutSec),
		IdleTimeout:       config.Duration(cfg.IdleTimeoutSec),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	d.applyLimits(&cfg)
	if d.metrics, err = listenMetrics(cfg.Metrics, cfg.AdminGroup, promReg, log); err != nil {
		return nil, err
	}
	return d, nil
}

// policyWatchInterval is how often the policy directory is checked for changed files.
const policyWatchInterval = 2 * time.Second

// policyConfig configures the engine; every load attempt is audited with the digest in force.
func policyConfig(cfg config.Config, rec *recorder, log *zap.Logger, onReload func(policy.ReloadEvent)) (policy.Config, error) {
	pc := policy.Config{WatchInterval: policyWatchInterval, DecisionCacheSize: 4096}
	// A policy directory that does not exist means no admin policy yet; one that exists must
	// pass the engine's ownership checks.
	if _, err := os.Stat(cfg.PolicyDir); err == nil {
		pc.PolicyDir = cfg.PolicyDir
	}
	if cfg.Bundle.URL != "" {
		bc, err := bundleConfig(cfg.Bundle)
		if err != nil {
			return pc, err
		}
		pc.Bundle = bc
	}
	pc.OnReload = func(ev policy.ReloadEvent) {
		detail := map[string]string{"trigger": ev.Trigger, "digest": ev.Digest, "previous": ev.Previous,
			"files": strings.Join(ev.Files, ",")}
		if ev.Err != nil {
			detail["error"] = ev.Err.Error()
			log.Error("policy load refused; the running policy stays in force", zap.String("trigger", ev.Trigger), zap.Error(ev.Err))
		}
		if err := rec.daemon(context.Background(), audit.KindPolicyLoad, detail); err != nil {
			log.Error("audit policy load", zap.Error(err))
		}
		if ev.Trigger != "start" && onReload != nil {
			onReload(ev)
		}
	}
	return pc, nil
}

// Serve serves on l until ctx is done or SIGTERM/SIGINT arrives, reloading on SIGHUP, then
// drains: in-flight calls get the drain deadline, what is left is killed.
func (d *Daemon) Serve(ctx context.Context, l net.Listener) error {
	// The socket actually served (systemd may pass another) is hidden from every child.
	// Set before the server starts, so every call sees it.
	d.core.host.DaemonSocket = l.Addr().String()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	start := map[string]string{"version": Version, "pid": strconv.Itoa(os.Getpid()), "socket": l.Addr().String()}
	if fp := d.core.egress.caSHA256; fp != "" {
		// Which CA the sessions' HTTPS was shown under, for whoever reads a capture later.
		start["egress_ca_sha256"] = fp
	}
	prev, err := readRunMarker(d.opts.StateDir)
	if err != nil {
		return err
	}
	if prev != nil {
		d.log.Warn("the previous daemon did not stop cleanly; daemon.start names the calls it left without an end", zap.Int("previous_pid", prev.PID))
		for k, v := range uncleanStopDetail(d.audit.Dir(), prev) {
			start[k] = v
		}
	}
	// What the calls a killed daemon left running made at protected paths, swept now as their
	// last sweep would have, before any call of this daemon's runs.
	for k, v := range recoveredDetail(d.core.sandbox.RecoverJournals()) {
		start[k] = v
	}
	marker := runMarker{PID: os.Getpid(), Started: time.Now()}
	if files, err := audit.ListFiles(d.audit.Dir()); err == nil && len(files) > 0 {
		marker.AuditFile = filepath.Base(files[len(files)-1])
	}
	if err := d.core.recorder.daemon(ctx, audit.KindDaemonStart, start); err != nil {
		// Served all the same: every call is refused until the log can be written.
		d.log.Error("audit the daemon's start", zap.Error(err))
	}
	if err := writeRunMarker(d.opts.StateDir, marker); err != nil {
		return err
	}
	// A signed head from the start: verify with the public key works before the first periodic checkpoint.
	if err := d.audit.Checkpoint(ctx); err != nil {
		d.log.Warn("initial audit checkpoint", zap.Error(err))
	}
	d.log.Info("serving", zap.String("socket", l.Addr().String()), zap.String("state_dir", d.opts.StateDir))
	if d.metrics != nil {
		d.metrics.start()
	}

	sweepCtx, stopSweep := context.WithCancel(ctx)
	swept := make(chan struct{})
	go func() { defer close(swept); d.core.sweep(sweepCtx) }()
	errc := make(chan error, 1)
	go func() { errc <- d.server.Serve(d.api.LimitListener(l)) }()
	// The socket is bound and served from here on: connections queue until accepted.
	d.notify(sdnotify.Ready)
	var serveErr error
	// A reload runs beside this loop, one at a time (a SIGHUP meanwhile makes one more after
	// it): it may wait on a session a request holds, and SIGTERM must still be heard.
	reloads := make(chan struct{}, 1)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		for range reloads {
			d.notify(sdnotify.Reloading())
			d.Reload()
			// READY=1 ends the reload whether it was refused or not: the daemon serves
			// either way, on the old configuration or the new.
			d.notify(sdnotify.Ready)
		}
	}()
	defer func() { close(reloads); <-reloaded }()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errc:
			if !errors.Is(err, http.ErrServerClosed) {
				serveErr = err
			}
			break loop
		case s := <-sigs:
			if s == syscall.SIGHUP {
				select {
				case reloads <- struct{}{}:
				default: // one is queued already, and reads what is there when it runs
				}
				continue
			}
			d.log.Info("signal: draining", zap.String("signal", s.String()))
			break loop
		}
	}
	d.notify(sdnotify.Stopping)
	stopSweep() // before the audit log closes: an expiry is audited
	<-swept
	d.shutdown()
	return serveErr
}

// Reload re-reads the configuration and swaps it atomically; a bad file keeps the old one.
func (d *Daemon) Reload() {
	cfg, err := config.Load(d.opts.ConfigPath, d.opts.ConfigRequired)
	if err != nil {
		d.core.reloads.record(&d.core.reloads.config, err)
		d.log.Error("reload refused; the running configuration stays in force", zap.Error(err))
		return
	}
	if err := raiseOpenFiles(uint64(max(cfg.Sandbox.OpenFilesMax, minOpenFiles))); err != nil {
		d.core.reloads.record(&d.core.reloads.config, err)
		d.log.Error("reload refused; the running configuration stays in force", zap.Error(err))
		return
	}
	old := d.core.Config()
	hooks, err := executor.NewHooks(d.core.host, cfg.Hooks)
	if err != nil {
		d.core.reloads.record(&d.core.reloads.config, fmt.Errorf("hooks: %w", err))
		d.log.Error("reload refused: hooks; the running configuration stays in force", zap.Error(err))
		return
	}
	d.core.reloads.record(&d.core.reloads.config, nil)
	for _, f := range restartOnly(*old, cfg) {
		d.log.Warn("changed setting takes effect at the next start", zap.String("setting", f))
	}
	d.core.cfg.Store(&cfg)
	d.applyLimits(&cfg)
	d.core.host.SetConfig(cfg.Sandbox)
	d.core.pipeline.SetHooks(hooks)
	d.core.ids.setAdminGroup(cfg.AdminGroup)
	if sandboxNarrows(old.Sandbox, cfg.Sandbox) {
		// Every command runs with the deny paths and system calls it started with.
		d.core.stopAllCommands()
	}
	if err := d.core.policy.Reload(context.Background()); err != nil {
		d.log.Error("policy reload refused; the running policy stays in force", zap.Error(err))
	}
	d.core.revokeNetworks(context.Background()) // last: a session whose lock is held is left to finish it
	d.log.Info("configuration reloaded")
}

// sandboxNarrows reports whether next confines calls more than old does, in what a running
// one could still do: a deny path added, an extra system call or unix sockets taken away.
func sandboxNarrows(old, next config.Sandbox) bool {
	gains := func(now, was []string) bool {
		return slices.ContainsFunc(now, func(x string) bool { return !slices.Contains(was, x) })
	}
	return gains(next.DenyPaths, old.DenyPaths) || gains(old.ExtraSyscalls, next.ExtraSyscalls) ||
		old.AllowUnixSockets && !next.AllowUnixSockets
}

// notify tells the service manager state, if one listens; a failure is logged, never fatal:
// the daemon serves whether or not systemd hears about it.
func (d *Daemon) notify(state string) {
	if d.opts.Notify == nil {
		return
	}
	if err := d.opts.Notify(state); err != nil {
		d.log.Warn("sd_notify", zap.Error(err))
	}
}

func (d *Daemon) shutdown() {
	if d.metrics != nil {
		d.metrics.stop() // first: a scrape during the drain would read half-closed state
	}
	drain := config.Duration(d.core.Config().DrainTimeoutSec)
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := d.server.Shutdown(ctx); err != nil {
		d.log.Warn("drain deadline passed; killing what is left", zap.Error(err))
	}
	// Whatever still runs is killed with its whole cgroup; handlers then return quickly.
	// Kill what still runs first (with its whole cgroup): the tools' bookkeeping waits for
	// their goroutines, which end only when their processes do.
	_ = d.core.sandbox.Close()
	d.core.egress.shutdown()
	d.core.host.CloseTools()
	_ = d.core.policy.Close()
	d.server.Close()
	d.api.Wait()
	if err := d.core.sandbox.RemoveCgroups(); err != nil {
		d.log.Warn("remove the cgroup subtree", zap.Error(err))
	}
	stopped := d.core.recorder.daemon(context.Background(), audit.KindDaemonStop, map[string]string{"pid": strconv.Itoa(os.Getpid())})
	if err := d.audit.Close(); err != nil {
		d.log.Error("close audit log", zap.Error(err))
	} else if stopped == nil {
		// Only once the stop is in the log: a stop it does not show was not clean.
		if err := removeRunMarker(d.opts.StateDir); err != nil {
			d.log.Error("remove the run marker", zap.Error(err))
		}
	}
	d.cgLock.Release()
	d.stateLock.Close()
}

// bundleConfig maps the config's bundle section onto the engine's, reading the key and token
// files (root-owned, like the rest of /etc/sandboxd).
func bundleConfig(b config.Bundle) (*policy.BundleConfig, error) {
	bc := &policy.BundleConfig{
		ServiceURL: b.URL, Resource: b.Resource, Name: b.Name,
		MinDelay: config.Duration(b.PollMinSec), MaxDelay: config.Duration(b.PollMaxSec),
		RequireSignature: b.RequireSignature == nil || *b.RequireSignature,
		FullPolicy:       b.FullPolicy, DecisionLogs: b.DecisionLogs, AllowInsecureDecisionLogs: b.AllowInsecureDecisionLogs,
	}
	if b.BearerTokenFile != "" {
		tok, err := regfile.Read(b.BearerTokenFile, 64<<10)
		if err != nil {
			return nil, fmt.Errorf("bundle bearer token: %w", err)
		}
		bc.BearerToken = strings.TrimSpace(string(tok))
	}
	if b.SigningKeyFile != "" {
		key, err := regfile.Read(b.SigningKeyFile, 64<<10)
		if err != nil {
			return nil, fmt.Errorf("bundle signing key: %w", err)
		}
		bc.Signing = &policy.BundleSigning{KeyID: b.SigningKeyID, Algorithm: b.SigningAlgorithm, Key: string(key), Scope: b.SigningScope}
	}
	return bc, nil
}

// restartOnly names the settings that changed but are fixed for the daemon's lifetime: the
// socket's HTTP limits, the cgroup subtree, the compiled seccomp filter, the audit log, and the
// egress proxy's interception, private ranges and port.
func restartOnly(old, cfg config.Config) []string {
	var out []string
	checks := []struct {
		name    string
		changed bool
	}{
		{"max_request_bytes", old.MaxRequestBytes != cfg.MaxRequestBytes},
		{"read_header_timeout_sec", old.ReadHeaderTimeoutSec != cfg.ReadHeaderTimeoutSec},
		{"read_body_timeout_sec", old.ReadBodyTimeoutSec != cfg.ReadBodyTimeoutSec},
		{"idle_timeout_sec", old.IdleTimeoutSec != cfg.IdleTimeoutSec},
		{"sandbox.cgroup_name", old.Sandbox.CgroupName != cfg.Sandbox.CgroupName},
		{"sandbox.extra_syscalls", strings.Join(old.Sandbox.ExtraSyscalls, ",") != strings.Join(cfg.Sandbox.ExtraSyscalls, ",")},
		{"audit", old.Audit != cfg.Audit},
		{"bundle", old.Bundle.URL != cfg.Bundle.URL || old.Bundle.Resource != cfg.Bundle.Resource},
		{"policy_dir", old.PolicyDir != cfg.PolicyDir},
		{"metrics", old.Metrics != cfg.Metrics},
		{"network.tls_intercept", old.Network.TLSIntercept != cfg.Network.TLSIntercept},
		{"network.allow_encrypted_client_hello", old.Network.AllowEncryptedClientHello != cfg.Network.AllowEncryptedClientHello},
		{"network.allow_private_cidrs", strings.Join(old.Network.AllowPrivateCIDRs, ",") != strings.Join(cfg.Network.AllowPrivateCIDRs, ",")},
		{"network.proxy_port", old.Network.ProxyPort != cfg.Network.ProxyPort},
		{"limits.user_memory_bytes", old.Limits.UserMemoryBytes != cfg.Limits.UserMemoryBytes},
		{"limits.user_pids", old.Limits.UserPids != cfg.Limits.UserPids},
	}
	for _, c := range checks {
		if c.changed {
			out = append(out, c.name)
		}
	}
	return out
}

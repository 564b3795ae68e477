package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/testground/sdk-go/run"
	"github.com/testground/sdk-go/runtime"
	"github.com/testground/sdk-go/sync"

	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/testplans/internal/plan"
	"github.com/p2pmsg/p2pmsg/testplans/internal/planlink"
)

func init() { plan.LoopbackHTTP() }

// Roles are the composition's group IDs.
const (
	roleSender   = "sender"
	roleReceiver = "receiver"
)

// Files the sender writes into its outputs directory.
const (
	outJSON     = "amtt.jsonl"
	outMarkdown = "amtt.md"
	outChart    = "amtt.svg"
)

// receiverInfo is what the receiver publishes: where it is and the
// advertisements of the two pipes it listens on.
type receiverInfo struct {
	Addr peer.AddrInfo `json:"addr"`
	Comm string        `json:"comm"` // pipe advertisement XML
	Data string        `json:"data"`
}

var (
	receiverTopic = sync.NewTopic("amtt-receiver", &receiverInfo{})
	stateDone     = sync.State("amtt-done")
)

func runAMTT(re *runtime.RunEnv, ic *run.InitContext) error {
	timeout, err := strconv.Atoi(param(re, "timeout_s", "600"))
	if err != nil {
		return fmt.Errorf("parameter timeout_s: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeout)*time.Second)
	defer cancel()

	role := re.TestGroupID
	if role != roleSender && role != roleReceiver {
		return fmt.Errorf("group %q: the amtt plan has groups %q and %q", role, roleSender, roleReceiver)
	}
	label, link, err := planlink.Link(re)
	if err != nil {
		return err
	}
	cfg, err := config(re, label)
	if err != nil {
		return err
	}
	senderShape, receiverShape := plan.Shapes(link)
	own, peerShape := senderShape, receiverShape
	if role == roleReceiver {
		own, peerShape = receiverShape, senderShape
	}
	// In process, the sender's node carries the whole link: the paper's
	// receiver sat on an unshaped campus network.
	emu, err := plan.Shape(ctx, re, ic.NetClient, own, peerShape, role == roleSender)
	if err != nil {
		return err
	}
	re.RecordMessage("%s on %s: %s (sidecar %v)", role, label, lab.DescribeLink(link), re.TestSidecar)
	listen, err := plan.ListenAddr(ic.NetClient)
	if err != nil {
		return err
	}
	p, err := lab.NewAMTTPeer(ctx, emu, cfg.Seed, listen)
	if err != nil {
		return err
	}
	defer p.Close()

	if role == roleReceiver {
		err = receive(ctx, re, ic, p)
	} else {
		err = send(ctx, re, ic, p, cfg, link)
	}
	if err != nil {
		return err
	}
	// Neither side closes its pipes before the other is done.
	_, err = ic.SyncClient.SignalAndWait(ctx, stateDone, re.TestInstanceCount)
	return err
}

func receive(ctx context.Context, re *runtime.RunEnv, ic *run.InitContext, p *lab.AMTTPeer) error {
	comm, data, err := lab.NewAMTTAdvs()
	if err != nil {
		return err
	}
	if err := p.Listen(comm, data); err != nil {
		return err
	}
	cx, _ := comm.Marshal()
	dx, _ := data.Marshal()
	if _, err := ic.SyncClient.Publish(ctx, receiverTopic, &receiverInfo{Addr: p.Node.AddrInfo(), Comm: string(cx), Data: string(dx)}); err != nil {
		return err
	}
	pipes, err := p.Accept(ctx)
	if err != nil {
		return fmt.Errorf("accepting the sender's pipes: %w", err)
	}
	re.RecordMessage("pipes accepted; serving")
	return lab.ServeAMTTReceiver(ctx, pipes)
}

// send runs the sender and writes its outputs.
func send(ctx context.Context, re *runtime.RunEnv, ic *run.InitContext, p *lab.AMTTPeer, cfg lab.AMTTConfig, link linkemu.Link) error {
	ch := make(chan *receiverInfo, 1)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	if _, err := ic.SyncClient.Subscribe(sctx, receiverTopic, ch); err != nil {
		return err
	}
	var info *receiverInfo
	select {
	case info = <-ch:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the receiver: %w", ctx.Err())
	}
	comm, err := adv.Parse([]byte(info.Comm))
	if err != nil {
		return err
	}
	data, err := adv.Parse([]byte(info.Data))
	if err != nil {
		return err
	}
	pipes, err := p.Connect(ctx, comm, data, info.Addr)
	if err != nil {
		return fmt.Errorf("connecting to the receiver: %w", err)
	}
	re.RecordMessage("pipes connected to %s; %d trials (+%d warm-up) of %v with %v", info.Addr.ID, cfg.Trials, max(cfg.Warmup, 0), cfg.Records, cfg.Codecs)
	cfg.Progress = os.Stderr
	cfg.Link = link // recorded in the results
	res, err := lab.RunAMTTSender(ctx, cfg, pipes)
	if err != nil {
		return err
	}
	for _, r := range res {
		id := fmt.Sprintf("amtt,profile=%s,codec=%s,records=%d", r.Profile, r.Codec, r.Records)
		re.R().RecordPoint(id+",kind=control", float64(r.ControlAMTT))
		re.R().RecordPoint(id+",kind=encoded", float64(r.AMTT))
	}
	files, err := outputs(res, cfg.Profile, link)
	if err != nil {
		return err
	}
	for _, name := range []string{outJSON, outMarkdown, outChart} {
		if err := plan.WriteOutput(re, name, files[name]); err != nil {
			return err
		}
	}
	re.RecordMessage("results:\n%s", files[outMarkdown])
	return nil
}

// outputs are the sender's files: the results as JSON lines, their
// Markdown table and their chart, headed by the link when the profile
// (label) is custom or changed, as `p2pmsg lab amtt` heads them.
func outputs(res []lab.AMTTResult, label string, link linkemu.Link) (map[string][]byte, error) {
	var j, md, svg bytes.Buffer
	if err := lab.WriteAMTTJSON(&j, res); err != nil {
		return nil, err
	}
	links := map[string]linkemu.Link{label: link}
	if err := lab.WriteAMTTMarkdownLinks(&md, res, links); err != nil {
		return nil, err
	}
	if err := lab.WriteAMTTChartLinks(&svg, res, links); err != nil {
		return nil, err
	}
	return map[string][]byte{outJSON: j.Bytes(), outMarkdown: md.Bytes(), outChart: svg.Bytes()}, nil
}

func param(re *runtime.RunEnv, name, def string) string {
	if v, ok := re.TestInstanceParams[name]; ok && v != "" {
		return v
	}
	return def
}

// config reads the experiment's parameters.
func config(re *runtime.RunEnv, label string) (lab.AMTTConfig, error) {
	cfg := lab.AMTTConfig{Profile: label}
	for _, s := range strings.Split(param(re, "codecs", strings.Join(lab.DefaultAMTTCodecs, ",")), ",") {
		cfg.Codecs = append(cfg.Codecs, strings.TrimSpace(s))
	}
	for _, s := range strings.Split(param(re, "sizes", "1,50,100,250,500,750,1000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return cfg, fmt.Errorf("parameter sizes: %q is not a record count", s)
		}
		cfg.Records = append(cfg.Records, n)
	}
	var err error
	if cfg.Trials, err = strconv.Atoi(param(re, "trials", strconv.Itoa(lab.DefaultAMTTTrials))); err != nil {
		return cfg, fmt.Errorf("parameter trials: %w", err)
	}
	if cfg.Warmup, err = strconv.Atoi(param(re, "warmup", strconv.Itoa(lab.DefaultAMTTWarmup))); err != nil {
		return cfg, fmt.Errorf("parameter warmup: %w", err)
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = -1 // AMTTConfig reads 0 as "the default"
	}
	if cfg.Seed, err = strconv.ParseUint(param(re, "seed", "1"), 10, 64); err != nil {
		return cfg, fmt.Errorf("parameter seed: %w", err)
	}
	if cfg.Seed == 0 { // AMTTConfig reads 0 as its default, 1: another run's
		return cfg, fmt.Errorf("%w: seed 0; want 1 or more", lab.ErrAMTTConfig)
	}
	// Both roles read the parameters: a configuration the sender's run
	// would refuse fails the receiver too, with the same cause.
	return cfg, cfg.Validate()
}

// JxsePeer runs an unmodified JXSE 2.7 peer for p2pmsg's interop tests:
// an ad-hoc peer in the net peer group on a TCP port of 127.0.0.1, no
// multicast, no HTTP, no seeds. It prints "READY <peer ID> <port>", then
// one "RECV <service> <param> <source> <text>" line per message its
// endpoint listener StudySvc/ep receives (the study:text element), and
// reads commands on stdin, one per line, answering each with "OK" or
// "ERR <reason>":
//
//   send <endpoint address> <text>   a message with study:text = text
//   pipelisten <pipe ID>             bind a unicast input pipe; each
//                                    message on it prints
//                                    "PIPE <pipe ID> <text>"
//   pipesend <pipe ID> <peer ID> <text>
//                                    resolve the unicast pipe on that peer
//                                    (once per pipe) and send on it
//   route <peer ID> <tcp://host:port>
//                                    tell the router where a peer is
//                                    (RouteController.addRoute)
//   ping <endpoint address> <n>      n round trips to another JxsePeer's
//                                    StudySvc/echo listener, one at a time;
//                                    answers "OK <median ns>"
//   pipeecho <in pipe ID> <out pipe ID> <peer ID>
//                                    bind the input pipe and send every
//                                    message on it back on the output pipe,
//                                    resolved on that peer
//   pipeping <out pipe ID> <in pipe ID> <peer ID> <n>
//                                    n round trips through another peer's
//                                    pipeecho; answers "OK <median ns>"
//   quit
//
// Its StudySvc/echo listener sends every message back to its source's
// StudySvc/echo-reply listener, for round-trip measurements.
//
// Usage: JxsePeer <name> <port> <home directory>
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Arrays;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

import net.jxta.endpoint.EndpointAddress;
import net.jxta.endpoint.EndpointListener;
import net.jxta.endpoint.EndpointService;
import net.jxta.endpoint.Message;
import net.jxta.endpoint.MessageElement;
import net.jxta.endpoint.Messenger;
import net.jxta.endpoint.StringMessageElement;
import net.jxta.endpoint.router.RouteController;
import net.jxta.document.AdvertisementFactory;
import net.jxta.id.IDFactory;
import net.jxta.peergroup.PeerGroup;
import net.jxta.pipe.OutputPipe;
import net.jxta.pipe.PipeMsgEvent;
import net.jxta.pipe.PipeMsgListener;
import net.jxta.pipe.PipeService;
import net.jxta.protocol.AccessPointAdvertisement;
import net.jxta.protocol.PipeAdvertisement;
import net.jxta.protocol.RouteAdvertisement;
import net.jxta.peer.PeerID;
import net.jxta.platform.NetworkConfigurator;
import net.jxta.platform.NetworkManager;

public class JxsePeer {
    static final PrintStream out = System.out;

    static synchronized void say(String s) {
        out.println(s);
        out.flush();
    }

    interface Sender {
        boolean send(Message m) throws Exception;
    }

    // medianRTT sends n one-element messages one at a time, each after the
    // answer to the last arrived on answers, and returns the median round
    // trip in nanoseconds, or -1 when an answer took over 30 s.
    static long medianRTT(int n, Sender s, LinkedBlockingQueue<Long> answers) throws Exception {
        long[] rtt = new long[n];
        for (int i = 0; i < n; i++) {
            Message m = new Message();
            m.addMessageElement("study", new StringMessageElement("text", "x", null));
            long t0 = System.nanoTime();
            s.send(m);
            Long t1 = answers.poll(30, TimeUnit.SECONDS);
            if (t1 == null) {
                return -1;
            }
            rtt[i] = t1 - t0;
        }
        Arrays.sort(rtt);
        return rtt[n / 2];
    }

    static PipeAdvertisement pipeAdv(String id) throws Exception {
        PipeAdvertisement adv = (PipeAdvertisement) AdvertisementFactory.newAdvertisement(PipeAdvertisement.getAdvertisementType());
        adv.setPipeID(IDFactory.fromURI(new URI(id)));
        adv.setType(PipeService.UnicastType);
        adv.setName("p2pmsg-test");
        return adv;
    }

    public static void main(String[] args) throws Exception {
        // JXSE and Netty print to stdout too; keep it for our lines.
        System.setOut(System.err);
        Logger.getLogger("net.jxta").setLevel(Level.SEVERE);
        String name = args[0];
        int port = Integer.parseInt(args[1]);
        File home = new File(args[2]);
        NetworkManager mgr = new NetworkManager(NetworkManager.ConfigMode.ADHOC, name, home.toURI());
        mgr.setConfigPersistent(false);
        NetworkConfigurator cfg = mgr.getConfigurator();
        cfg.setTcpEnabled(true);
        cfg.setTcpIncoming(true);
        cfg.setTcpOutgoing(true);
        cfg.setTcpInterfaceAddress("127.0.0.1");
        cfg.setTcpPort(port);
        cfg.setTcpStartPort(-1);
        cfg.setTcpEndPort(-1);
        cfg.setTcpPublicAddress("127.0.0.1:" + port, true);
        cfg.setUseMulticast(false);
        cfg.setHttpEnabled(false);
        cfg.setHttp2Enabled(false);
        cfg.setUseOnlyRendezvousSeeds(true);
        cfg.setUseOnlyRelaySeeds(true);
        PeerGroup group = mgr.startNetwork();
        final EndpointService ep = group.getEndpointService();
        ep.addIncomingMessageListener(new EndpointListener() {
            public void processIncomingMessage(Message m, EndpointAddress src, EndpointAddress dst) {
                MessageElement e = m.getMessageElement("study", "text");
                say("RECV " + dst.getServiceName() + " " + dst.getServiceParameter() + " " + src + " " + (e == null ? "" : e.toString()));
            }
        }, "StudySvc", "ep");
        final Map<String, Messenger> echoTo = new HashMap<String, Messenger>();
        ep.addIncomingMessageListener(new EndpointListener() {
            public void processIncomingMessage(Message m, EndpointAddress src, EndpointAddress dst) {
                try {
                    String k = src.getProtocolName() + "://" + src.getProtocolAddress();
                    Messenger back;
                    synchronized (echoTo) {
                        back = echoTo.get(k);
                        if (back == null) {
                            back = ep.getMessenger(new EndpointAddress(k + "/StudySvc/echo-reply"));
                            echoTo.put(k, back);
                        }
                    }
                    Message r = new Message();
                    MessageElement e = m.getMessageElement("study", "text");
                    r.addMessageElement("study", new StringMessageElement("text", e == null ? "" : e.toString(), null));
                    back.sendMessage(r);
                } catch (Exception ex) {
                    System.err.println("echo: " + ex);
                }
            }
        }, "StudySvc", "echo");
        final LinkedBlockingQueue<Long> replies = new LinkedBlockingQueue<Long>();
        ep.addIncomingMessageListener(new EndpointListener() {
            public void processIncomingMessage(Message m, EndpointAddress src, EndpointAddress dst) {
                replies.add(System.nanoTime());
            }
        }, "StudySvc", "echo-reply");
        say("READY " + group.getPeerID() + " " + port);
        final PipeService pipes = group.getPipeService();
        Map<String, Object> keep = new HashMap<String, Object>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split(" ", 3);
            try {
                if (f[0].equals("quit")) {
                    break;
                } else if (f[0].equals("send") && f.length == 3) {
                    Messenger msgr = ep.getMessenger(new EndpointAddress(f[1]));
                    if (msgr == null) {
                        say("ERR no messenger for " + f[1]);
                        continue;
                    }
                    Message m = new Message();
                    m.addMessageElement("study", new StringMessageElement("text", f[2], null));
                    say(msgr.sendMessage(m) ? "OK" : "ERR not sent");
                } else if (f[0].equals("ping") && f.length == 3) {
                    Messenger to = ep.getMessenger(new EndpointAddress(f[1]));
                    long p50 = medianRTT(Integer.parseInt(f[2]), m -> to.sendMessage(m), replies);
                    say(p50 >= 0 ? "OK " + p50 : "ERR no echo within 30 s");
                } else if (f[0].equals("pipeecho") && f.length == 3) {
                    final String[] g = f[2].split(" ");
                    final OutputPipe[] back = new OutputPipe[1];
                    keep.put("echo " + f[1], pipes.createInputPipe(pipeAdv(f[1]), new PipeMsgListener() {
                        public synchronized void pipeMsgEvent(PipeMsgEvent ev) {
                            try {
                                if (back[0] == null) { // resolved at the first message
                                    back[0] = pipes.createOutputPipe(pipeAdv(g[0]), Collections.singleton(IDFactory.fromURI(new URI(g[1]))), 30000);
                                }
                                Message r = new Message();
                                MessageElement e = ev.getMessage().getMessageElement("study", "text");
                                r.addMessageElement("study", new StringMessageElement("text", e == null ? "" : e.toString(), null));
                                back[0].send(r);
                            } catch (Exception ex) {
                                System.err.println("pipeecho: " + ex);
                            }
                        }
                    }));
                    say("OK");
                } else if (f[0].equals("pipeping") && f.length == 3) {
                    String[] g = f[2].split(" ");
                    final LinkedBlockingQueue<Long> got = new LinkedBlockingQueue<Long>();
                    Object pingIn = pipes.createInputPipe(pipeAdv(g[0]), new PipeMsgListener() {
                        public void pipeMsgEvent(PipeMsgEvent ev) {
                            got.add(System.nanoTime());
                        }
                    });
                    OutputPipe op = pipes.createOutputPipe(pipeAdv(f[1]), Collections.singleton(IDFactory.fromURI(new URI(g[1]))), 30000);
                    long p50 = medianRTT(Integer.parseInt(g[2]), m -> op.send(m), got);
                    op.close();
                    ((net.jxta.pipe.InputPipe) pingIn).close();
                    say(p50 >= 0 ? "OK " + p50 : "ERR no echo within 30 s");
                } else if (f[0].equals("route") && f.length == 3) {
                    PeerID pid = (PeerID) IDFactory.fromURI(new URI(f[1]));
                    AccessPointAdvertisement ap = (AccessPointAdvertisement) AdvertisementFactory.newAdvertisement(AccessPointAdvertisement.getAdvertisementType());
                    ap.setPeerID(pid);
                    ap.addEndpointAddress(new EndpointAddress(f[2]));
                    RouteAdvertisement ra = (RouteAdvertisement) AdvertisementFactory.newAdvertisement(RouteAdvertisement.getAdvertisementType());
                    ra.setDestPeerID(pid);
                    ra.setDest(ap);
                    int r = ep.getEndpointRouter().getRouteController().addRoute(ra);
                    say(r == RouteController.OK || r == RouteController.ALREADY_EXIST ? "OK" : "ERR addRoute " + r);
                } else if (f[0].equals("pipelisten") && f.length == 2) {
                    final String pid = f[1];
                    keep.put("in " + pid, pipes.createInputPipe(pipeAdv(pid), new PipeMsgListener() {
                        public void pipeMsgEvent(PipeMsgEvent ev) {
                            MessageElement e = ev.getMessage().getMessageElement("study", "text");
                            say("PIPE " + pid + " " + (e == null ? "" : e.toString()));
                        }
                    }));
                    say("OK");
                } else if (f[0].equals("pipesend") && f.length == 3) {
                    String[] g = f[2].split(" ", 2);
                    String k = "out " + f[1] + " " + g[0];
                    OutputPipe op = (OutputPipe) keep.get(k);
                    if (op == null) {
                        op = pipes.createOutputPipe(pipeAdv(f[1]), Collections.singleton(IDFactory.fromURI(new URI(g[0]))), 30000);
                        keep.put(k, op);
                    }
                    Message m = new Message();
                    m.addMessageElement("study", new StringMessageElement("text", g.length > 1 ? g[1] : "", null));
                    say(op.send(m) ? "OK" : "ERR not sent");
                } else {
                    say("ERR bad command");
                }
            } catch (Exception e) {
                say("ERR " + e.toString().replace('\n', ' '));
            }
        }
        mgr.stopNetwork();
        System.exit(0);
    }
}

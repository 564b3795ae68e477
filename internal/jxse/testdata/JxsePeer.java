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
//   bidilisten <pipe ID>             a JxtaServerPipe on the unicast pipe,
//                                    accepting forever; per accepted
//                                    (reliable) JxtaBiDiPipe it prints
//                                    "BIDI-OPEN <pipe ID> <remote peer ID>",
//                                    per message "BIDI <pipe ID> <text>"
//                                    and sends the text back on that bidi
//                                    pipe, and "BIDI-CLOSED <pipe ID>" when
//                                    the other side closes it
//   bidiconnect <pipe ID> <peer ID> <n>
//                                    open a reliable JxtaBiDiPipe to the
//                                    pipe bound on that peer, send
//                                    "m1".."mn", wait (30 s at most) for n
//                                    answers, close; answers
//                                    "OK <answers' texts joined by ,>", in
//                                    the order they came: JXSE's worker
//                                    threads call a bidi pipe's listener
//                                    concurrently, so messages sent back to
//                                    back may come (and be echoed) out of
//                                    order
//   bidiping <pipe ID> <peer ID> <n> open as bidiconnect, n round trips
//                                    through a bidilisten, one at a time,
//                                    close; answers "OK <median ns>"
//   socklisten <pipe ID> <mode>      a JxtaServerSocket on the unicast pipe,
//                                    accepting forever, each connection in
//                                    its own thread; mode "sink": read to
//                                    EOF, print "SOCK <pipe ID> <bytes>
//                                    <sha256 hex>", close; "echo": write
//                                    back (and flush) what each read()
//                                    returns until EOF, close; "send:<N>":
//                                    write N pattern bytes in one write(),
//                                    flush, close, print
//                                    "SOCK-SENT <pipe ID> <N>"
//   sockconnect <pipe ID> <peer ID> <N> <mode>
//                                    open a reliable JxtaSocket to the pipe
//                                    bound on that peer; mode "send": write
//                                    N pattern bytes in one write(), flush,
//                                    close, answer "OK <sha256 hex>"; mode
//                                    "recv": read to EOF (N ignored), close,
//                                    answer "OK <bytes> <sha256 hex>"; modes
//                                    "usend" and "urecv" do the same over an
//                                    unreliable JxtaSocket (stream=false)
//   sockping <pipe ID> <peer ID> <n> n round trips of 1 byte (write, flush,
//                                    read) through a socklisten in echo mode,
//                                    close (250 ms after the last: see the
//                                    code); answers "OK <median ns>"
//   socksendrate <pipe ID> <peer ID> <N>
//                                    connect, write N pattern bytes in
//                                    64 KiB write() calls, flush, close
//                                    (which waits until every block is
//                                    acknowledged and the close is too);
//                                    answers "OK <ns from connected to
//                                    closed>"
//   eprun <endpoint address> <n> <size>
//   piperun <out pipe ID> <in pipe ID> <peer ID> <n> <size>
//   sockrun <pipe ID> <peer ID> <n> <size>
//                                    n round trips of a size-byte payload
//                                    (study:text of size "x"; for sockrun
//                                    size bytes written, then read back),
//                                    one at a time, through another peer's
//                                    StudySvc/echo, pipeecho, or socklisten
//                                    in echo mode; the messenger, pipes or
//                                    socket are made at the first call and
//                                    kept for the next ones (so each call
//                                    times round trips only); answers
//                                    "OK <total ns>" (p2pmsg lab rtt's
//                                    JXSE-to-JXSE reference)
//   quit
//
// Its StudySvc/echo listener sends every message back to its source's
// StudySvc/echo-reply listener, for round-trip measurements.
//
// The pattern is byte i = (byte) (i * 7 + i / 65536), i from 0 (Pattern
// in peer.go); sha256 hex is lower case. Socket and bidi clients connect
// with a 30 s timeout, their resolution directed at the given peer (which
// must be reachable: see route); socket reads time out after 30 s
// (clients) or 60 s (listeners). Listener threads report failures on
// stderr; a command that fails answers "ERR <reason>".
//
// Usage: JxsePeer <name> <port> <home directory>
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.Socket;
import java.net.URI;
import java.security.MessageDigest;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
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
import net.jxta.socket.JxtaServerSocket;
import net.jxta.socket.JxtaSocket;
import net.jxta.util.JxtaBiDiPipe;
import net.jxta.util.JxtaServerPipe;

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
        return median(rtt);
    }

    // totalRTT makes n round trips of a size-character study:text message,
    // each sent once the answer to the last arrived on answers, and returns
    // their total time in nanoseconds, or -1 when an answer took over 30 s.
    static long totalRTT(int n, int size, Sender s, LinkedBlockingQueue<Long> answers) throws Exception {
        char[] c = new char[size];
        Arrays.fill(c, 'x');
        String text = new String(c);
        answers.clear();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            s.send(textMessage(text));
            if (answers.poll(30, TimeUnit.SECONDS) == null) {
                return -1;
            }
        }
        return System.nanoTime() - t0;
    }

    static long median(long[] v) {
        Arrays.sort(v);
        return v[v.length / 2];
    }

    static PipeAdvertisement pipeAdv(String id) throws Exception {
        PipeAdvertisement adv = (PipeAdvertisement) AdvertisementFactory.newAdvertisement(PipeAdvertisement.getAdvertisementType());
        adv.setPipeID(IDFactory.fromURI(new URI(id)));
        adv.setType(PipeService.UnicastType);
        adv.setName("p2pmsg-test");
        return adv;
    }

    static String text(Message m) {
        MessageElement e = m.getMessageElement("study", "text");
        return e == null ? "" : e.toString();
    }

    static Message textMessage(String text) {
        Message m = new Message();
        m.addMessageElement("study", new StringMessageElement("text", text, null));
        return m;
    }

    static PeerID peerID(String id) throws Exception {
        return (PeerID) IDFactory.fromURI(new URI(id));
    }

    // pattern returns the test byte pattern: byte i = (byte) (i * 7 + i / 65536).
    static byte[] pattern(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) ((i * 7 + i / 65536) & 0xff);
        }
        return b;
    }

    static MessageDigest sha256() throws Exception {
        return MessageDigest.getInstance("SHA-256");
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(2 * b.length);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return sb.toString();
    }

    static void daemon(String name, Runnable r) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
    }

    // bidiOpen opens a reliable JxtaBiDiPipe to the pipe bound on peer and
    // waits until the server's open response arrived. JXSE 2.7's connect
    // returns at once and resolves the pipe in the background; a message
    // sent before the response would go out under a reliable stream that
    // the response replaces, so wait for PIPE_OPENED_EVENT.
    static JxtaBiDiPipe bidiOpen(PeerGroup group, String pipe, String peer, PipeMsgListener l) throws Exception {
        final CountDownLatch done = new CountDownLatch(1);
        JxtaBiDiPipe bidi = new JxtaBiDiPipe();
        bidi.setPipeEventListener(ev -> done.countDown()); // opened, or closed when resolution timed out
        bidi.connect(group, peerID(peer), pipeAdv(pipe), 30000, l, true);
        if (!done.await(40, TimeUnit.SECONDS) || !bidi.isBound()) {
            bidi.close();
            throw new IOException("bidi pipe not opened within 30 s");
        }
        return bidi;
    }

    // sockOpen connects a reliable JxtaSocket to the pipe bound on peer.
    static JxtaSocket sockOpen(PeerGroup group, String pipe, String peer) throws Exception {
        return sockOpen(group, pipe, peer, true);
    }

    static JxtaSocket sockOpen(PeerGroup group, String pipe, String peer, boolean reliable) throws Exception {
        JxtaSocket s = new JxtaSocket(group, peerID(peer), pipeAdv(pipe), 30000, reliable);
        s.setSoTimeout(30000); // see serveSocket
        return s;
    }

    // serveBiDi reports and echoes what comes on an accepted bidi pipe. The
    // echo goes out from a thread of its own: JXSE calls the listener on
    // its JxtaWorker threads (several at once), the ones that also deliver
    // the ACKs a reliable send may wait for.
    static void serveBiDi(final JxtaBiDiPipe bidi, final String pid, final Map<JxtaBiDiPipe, Boolean> open) {
        final ExecutorService echo = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "bidi echo " + pid);
            t.setDaemon(true);
            return t;
        });
        say("BIDI-OPEN " + pid + " " + bidi.getRemotePeerAdvertisement().getPeerID());
        bidi.setPipeEventListener(ev -> {
            if (ev == JxtaBiDiPipe.PIPE_CLOSED_EVENT) {
                echo.shutdown();
                open.remove(bidi);
                say("BIDI-CLOSED " + pid);
            }
        });
        bidi.setMessageListener(ev -> {
            final String s = text(ev.getMessage());
            say("BIDI " + pid + " " + s);
            try {
                echo.execute(() -> {
                    try {
                        if (!bidi.sendMessage(textMessage(s))) {
                            System.err.println("bidilisten " + pid + ": echo not sent");
                        }
                    } catch (IOException ex) {
                        System.err.println("bidilisten " + pid + ": " + ex);
                    }
                });
            } catch (Exception ex) { // closed meanwhile
                System.err.println("bidilisten " + pid + ": " + ex);
            }
        });
    }

    // serveSocket handles one connection accepted by socklisten. JXSE 2.7
    // builds a socket's reliable input stream with a 100 ms read timeout
    // (its soTimeout field starts at 100, whatever getSoTimeout says), so a
    // read that waits longer throws "Read timeout reached": every socket
    // here sets its own.
    static void serveSocket(Socket s, String pid, String mode) {
        boolean closed = false;
        try {
            s.setSoTimeout(60000);
            byte[] buf = new byte[65536];
            if (mode.equals("sink")) {
                MessageDigest d = sha256();
                long n = 0;
                InputStream in = s.getInputStream();
                for (int k; (k = in.read(buf)) != -1; ) {
                    d.update(buf, 0, k);
                    n += k;
                }
                say("SOCK " + pid + " " + n + " " + hex(d.digest()));
            } else if (mode.equals("echo")) {
                InputStream in = s.getInputStream();
                OutputStream out = s.getOutputStream();
                for (int k; (k = in.read(buf)) != -1; ) {
                    out.write(buf, 0, k);
                    out.flush();
                }
            } else {
                int n = Integer.parseInt(mode.substring("send:".length()));
                OutputStream out = s.getOutputStream();
                out.write(pattern(n));
                out.flush();
                closed = true;
                s.close(); // returns once every block is acknowledged
                say("SOCK-SENT " + pid + " " + n);
            }
        } catch (Exception ex) {
            System.err.println("socklisten " + pid + " " + mode + ": " + ex);
        } finally {
            if (!closed) {
                try {
                    s.close();
                } catch (IOException ex) {
                    System.err.println("socklisten " + pid + " " + mode + ": close: " + ex);
                }
            }
        }
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
        // Accepted bidi pipes, kept reachable until closed.
        final Map<JxtaBiDiPipe, Boolean> openBiDi = new ConcurrentHashMap<JxtaBiDiPipe, Boolean>();
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
                } else if (f[0].equals("bidilisten") && f.length == 2) {
                    final String pid = f[1];
                    final JxtaServerPipe server = new JxtaServerPipe(group, pipeAdv(pid));
                    server.setPipeTimeout(0); // accept() waits forever
                    keep.put("bidi " + pid, server);
                    daemon("bidilisten " + pid, () -> {
                        while (!server.isClosed()) {
                            try {
                                JxtaBiDiPipe bidi = server.accept();
                                if (bidi != null) {
                                    openBiDi.put(bidi, true);
                                    serveBiDi(bidi, pid, openBiDi);
                                }
                            } catch (Exception ex) {
                                System.err.println("bidilisten " + pid + ": " + ex);
                                return;
                            }
                        }
                    });
                    say("OK");
                } else if ((f[0].equals("bidiconnect") || f[0].equals("bidiping")) && f.length == 3) {
                    String[] g = f[2].split(" ");
                    int n = Integer.parseInt(g[1]);
                    if (f[0].equals("bidiping")) {
                        final LinkedBlockingQueue<Long> got = new LinkedBlockingQueue<Long>();
                        final JxtaBiDiPipe bidi = bidiOpen(group, f[1], g[0], ev -> got.add(System.nanoTime()));
                        long p50;
                        try {
                            p50 = medianRTT(n, m -> bidi.sendMessage(m), got);
                        } finally {
                            bidi.close();
                        }
                        say(p50 >= 0 ? "OK " + p50 : "ERR no echo within 30 s");
                        continue;
                    }
                    final LinkedBlockingQueue<String> got = new LinkedBlockingQueue<String>();
                    JxtaBiDiPipe bidi = bidiOpen(group, f[1], g[0], ev -> got.add(text(ev.getMessage())));
                    StringBuilder answers = new StringBuilder();
                    String err = null;
                    try {
                        for (int i = 1; i <= n && err == null; i++) {
                            if (!bidi.sendMessage(textMessage("m" + i))) {
                                err = "m" + i + " not sent";
                            }
                        }
                        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                        for (int i = 0; i < n && err == null; i++) {
                            String a = got.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
                            if (a == null) {
                                err = i + " of " + n + " answers within 30 s";
                            } else {
                                answers.append(i > 0 ? "," : "").append(a);
                            }
                        }
                    } finally {
                        bidi.close();
                    }
                    say(err == null ? "OK " + answers : "ERR " + err);
                } else if (f[0].equals("socklisten") && f.length == 3) {
                    final String pid = f[1];
                    final String mode = f[2];
                    if (!mode.equals("sink") && !mode.equals("echo") && !mode.matches("send:[0-9]+")) {
                        say("ERR bad mode " + mode);
                        continue;
                    }
                    final JxtaServerSocket server = new JxtaServerSocket(group, pipeAdv(pid));
                    server.setSoTimeout(0); // accept() waits forever
                    keep.put("sock " + pid, server);
                    daemon("socklisten " + pid, () -> {
                        while (!server.isClosed()) {
                            try {
                                final Socket s = server.accept();
                                daemon("sock " + pid, () -> serveSocket(s, pid, mode));
                            } catch (Exception ex) {
                                System.err.println("socklisten " + pid + ": " + ex);
                                return;
                            }
                        }
                    });
                    say("OK");
                } else if (f[0].equals("sockconnect") && f.length == 3) {
                    String[] g = f[2].split(" ");
                    if (g.length != 3 || !g[2].matches("u?(send|recv)")) {
                        say("ERR bad command");
                        continue;
                    }
                    int n = Integer.parseInt(g[1]);
                    JxtaSocket s = sockOpen(group, f[1], g[0], !g[2].startsWith("u"));
                    g[2] = g[2].replaceFirst("^u", "");
                    MessageDigest d = sha256();
                    long got = 0;
                    try {
                        if (g[2].equals("send")) {
                            byte[] b = pattern(n);
                            d.update(b);
                            OutputStream out = s.getOutputStream();
                            out.write(b);
                            out.flush();
                        } else {
                            byte[] buf = new byte[65536];
                            InputStream is = s.getInputStream();
                            for (int k; (k = is.read(buf)) != -1; ) {
                                d.update(buf, 0, k);
                                got += k;
                            }
                        }
                    } finally {
                        s.close();
                    }
                    say(g[2].equals("send") ? "OK " + hex(d.digest()) : "OK " + got + " " + hex(d.digest()));
                } else if (f[0].equals("sockping") && f.length == 3) {
                    String[] g = f[2].split(" ");
                    int n = Integer.parseInt(g[1]);
                    JxtaSocket s = sockOpen(group, f[1], g[0]);
                    long[] rtt = new long[n];
                    try {
                        OutputStream out = s.getOutputStream();
                        InputStream is = s.getInputStream();
                        for (int i = 0; i < n; i++) {
                            long t0 = System.nanoTime();
                            out.write('x');
                            out.flush();
                            if (is.read() == -1) {
                                throw new EOFException("echo socket closed after " + i + " round trips");
                            }
                            rtt[i] = System.nanoTime() - t0;
                        }
                        // JXSE answers a close with closeACK only if every
                        // block it sent is acknowledged at that instant, and
                        // its worker threads may handle our close before our
                        // ACK of the last echo, sent just before: then the
                        // close fails after 30 s. Let the ACK go first.
                        Thread.sleep(250);
                    } finally {
                        s.close();
                    }
                    say("OK " + median(rtt));
                } else if (f[0].equals("eprun") && f.length == 3) {
                    String[] g = f[2].split(" ");
                    Messenger to = (Messenger) keep.get("eprun " + f[1]);
                    if (to == null) {
                        to = ep.getMessenger(new EndpointAddress(f[1]));
                        keep.put("eprun " + f[1], to);
                    }
                    final Messenger msgr = to;
                    long t = totalRTT(Integer.parseInt(g[0]), Integer.parseInt(g[1]), m -> msgr.sendMessage(m), replies);
                    say(t >= 0 ? "OK " + t : "ERR no echo within 30 s");
                } else if (f[0].equals("piperun") && f.length == 3) {
                    String[] g = f[2].split(" ");
                    String k = "piperun " + f[1] + " " + g[0];
                    @SuppressWarnings("unchecked")
                    LinkedBlockingQueue<Long> got = (LinkedBlockingQueue<Long>) keep.get(k + " q");
                    if (got == null) {
                        final LinkedBlockingQueue<Long> q = new LinkedBlockingQueue<Long>();
                        keep.put(k + " in", pipes.createInputPipe(pipeAdv(g[0]), ev -> q.add(System.nanoTime())));
                        keep.put(k + " out", pipes.createOutputPipe(pipeAdv(f[1]), Collections.singleton(peerID(g[1])), 30000));
                        keep.put(k + " q", q);
                        got = q;
                    }
                    final OutputPipe op = (OutputPipe) keep.get(k + " out");
                    long t = totalRTT(Integer.parseInt(g[2]), Integer.parseInt(g[3]), m -> op.send(m), got);
                    say(t >= 0 ? "OK " + t : "ERR no echo within 30 s");
                } else if (f[0].equals("sockrun") && f.length == 3) {
                    String[] g = f[2].split(" ");
                    String k = "sockrun " + f[1] + " " + g[0];
                    JxtaSocket s = (JxtaSocket) keep.get(k);
                    if (s == null) {
                        s = sockOpen(group, f[1], g[0]);
                        keep.put(k, s);
                    }
                    int n = Integer.parseInt(g[1]);
                    byte[] b = new byte[Integer.parseInt(g[2])];
                    OutputStream out = s.getOutputStream();
                    DataInputStream is = new DataInputStream(s.getInputStream());
                    long t0 = System.nanoTime();
                    for (int i = 0; i < n; i++) {
                        out.write(b);
                        out.flush();
                        is.readFully(b);
                    }
                    say("OK " + (System.nanoTime() - t0));
                } else if (f[0].equals("socksendrate") && f.length == 3) {
                    String[] g = f[2].split(" ");
                    byte[] b = pattern(Integer.parseInt(g[1]));
                    JxtaSocket s = sockOpen(group, f[1], g[0]);
                    long t0 = System.nanoTime();
                    try {
                        OutputStream out = s.getOutputStream();
                        for (int off = 0; off < b.length; off += 65536) {
                            out.write(b, off, Math.min(65536, b.length - off));
                        }
                        out.flush();
                    } finally {
                        s.close();
                    }
                    say("OK " + (System.nanoTime() - t0));
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

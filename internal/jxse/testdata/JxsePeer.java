// JxsePeer runs an unmodified JXSE 2.7 peer for p2pmsg's interop tests:
// an ad-hoc peer in the net peer group on a TCP port of 127.0.0.1, no
// multicast, no HTTP, no seeds. It prints "READY <peer ID> <port>", then
// one "RECV <service> <param> <source> <text>" line per message its
// endpoint listener StudySvc/ep receives (the study:text element), and
// reads commands on stdin, one per line, answering each with "OK" or
// "ERR <reason>":
//
//   send <endpoint address> <text>   a message with study:text = text
//   quit
//
// Usage: JxsePeer <name> <port> <home directory>
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.util.logging.Level;
import java.util.logging.Logger;

import net.jxta.endpoint.EndpointAddress;
import net.jxta.endpoint.EndpointListener;
import net.jxta.endpoint.EndpointService;
import net.jxta.endpoint.Message;
import net.jxta.endpoint.MessageElement;
import net.jxta.endpoint.Messenger;
import net.jxta.endpoint.StringMessageElement;
import net.jxta.peergroup.PeerGroup;
import net.jxta.platform.NetworkConfigurator;
import net.jxta.platform.NetworkManager;

public class JxsePeer {
    static final PrintStream out = System.out;

    static synchronized void say(String s) {
        out.println(s);
        out.flush();
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
        say("READY " + group.getPeerID() + " " + port);
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

// IdOracle runs JXSE 2.7's ID factory for p2pmsg's interop tests.
//
//   IdOracle gen N      prints N IDs of every kind in the uuid and cbid formats, one per line
//   IdOracle parse      line = b64(string); answer = "OK id kind group" or "ERR reason"
//   IdOracle seed       line = b64(seed); answer = "pipeID peerID" made from it in the Net group
import java.io.*;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import net.jxta.id.*;
import net.jxta.peergroup.PeerGroupID;

public class IdOracle {
    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out), false, "US-ASCII");
        if (args[0].equals("gen")) {
            int n = Integer.parseInt(args[1]);
            for (int i = 0; i < n; i++) {
                for (String f : new String[] {"uuid", "cbid"}) {
                    PeerGroupID g = IDFactory.newPeerGroupID(f);
                    out.println(g);
                    out.println(IDFactory.newPeerGroupID(g));
                    out.println(IDFactory.newPeerID(g));
                    out.println(IDFactory.newPipeID(g));
                    out.println(IDFactory.newCodatID(g));
                    net.jxta.platform.ModuleClassID mc = IDFactory.newModuleClassID();
                    out.println(mc);
                    out.println(IDFactory.newModuleSpecID(mc));
                }
                out.println(IDFactory.newPipeID(PeerGroupID.defaultNetPeerGroupID));
                out.println(IDFactory.newPeerID(PeerGroupID.worldPeerGroupID));
            }
            out.flush();
            return;
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        String line;
        while ((line = in.readLine()) != null) {
            try {
                byte[] arg = Base64.getDecoder().decode(line);
                if (args[0].equals("seed")) {
                    out.println(IDFactory.newPipeID(PeerGroupID.defaultNetPeerGroupID, arg) + " "
                        + IDFactory.newPeerID(PeerGroupID.defaultNetPeerGroupID, arg));
                } else {
                    ID id = IDFactory.fromURI(new URI(new String(arg, StandardCharsets.UTF_8)));
                    out.println("OK " + id + " " + kind(id) + " " + group(id));
                }
            } catch (Throwable t) {
                out.println("ERR " + t.toString().replace('\n', ' '));
            }
        }
        out.flush();
    }

    static int kind(ID id) {
        if (id instanceof net.jxta.codat.CodatID) return 1;
        if (id instanceof PeerGroupID) return 2;
        if (id instanceof net.jxta.peer.PeerID) return 3;
        if (id instanceof net.jxta.pipe.PipeID) return 4;
        if (id instanceof net.jxta.platform.ModuleClassID) return 5;
        if (id instanceof net.jxta.platform.ModuleSpecID) return 6;
        return 0;
    }

    static Object group(ID id) {
        if (id instanceof net.jxta.codat.CodatID) return ((net.jxta.codat.CodatID) id).getPeerGroupID();
        if (id instanceof PeerGroupID) return ((PeerGroupID) id).getParentPeerGroupID();
        if (id instanceof net.jxta.peer.PeerID) return ((net.jxta.peer.PeerID) id).getPeerGroupID();
        if (id instanceof net.jxta.pipe.PipeID) return ((net.jxta.pipe.PipeID) id).getPeerGroupID();
        return "-";
    }
}

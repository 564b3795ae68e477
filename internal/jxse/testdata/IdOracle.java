// IdOracle answers questions about JXTA IDs with JXSE 2.7, for the interop
// tests of p2pmsg's pkg/id.
//
// It reads one request per line on stdin and writes exactly one answer line
// per request on stdout. Arguments are separated by single spaces; free text
// is base64 (standard alphabet), seeds are hex ("-" for an empty seed), IDs
// are given as their urn:jxta: text. "-" in an answer means "none" (Java
// null, or not applicable). A request that throws answers "ERR <exception>".
//
//   parse B64TEXT     -> OK ID KIND FORMAT GROUP BASECLASS
//                        IDFactory.fromURI(new URI(text)); KIND is the type
//                        byte (0 for jxta-Null), GROUP getPeerGroupID() or,
//                        for a group, getParentPeerGroupID(), BASECLASS
//                        getBaseClass() of module IDs.
//   gen FORMAT        -> ID... new random IDs made in FORMAT (uuid or cbid):
//                        group, subgroup, peer, pipe, codat, codat with a
//                        content hash, module class, module role class,
//                        module spec, content, static content; then IDs made
//                        in the well-known groups: pipe, peer, subgroup and
//                        codat in the Net group, subgroup of the World group.
//   new GROUP         -> PIPE PEER SUBGROUP CODAT  random, made in GROUP
//   seed GROUP HEX    -> PIPE PEER SUBGROUP CODAT  newPipeID(GROUP, seed) ...
//   seedroot HEX      -> GROUP                     newPeerGroupID(seed)
//   spec CLASS        -> SPEC ROLE                 newModuleSpecID(CLASS),
//                                                  newModuleClassID(CLASS)
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Random;

import net.jxta.codat.CodatID;
import net.jxta.content.ContentID;
import net.jxta.id.ID;
import net.jxta.id.IDFactory;
import net.jxta.peer.PeerID;
import net.jxta.peergroup.PeerGroupID;
import net.jxta.pipe.PipeID;
import net.jxta.platform.ModuleClassID;
import net.jxta.platform.ModuleSpecID;

public class IdOracle {
    private static final Random random = new Random();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            String answer;
            try {
                answer = answer(line.split(" ", -1));
            } catch (Throwable t) {
                answer = "ERR " + t.toString().replace('\n', ' ').replace('\r', ' ');
            }
            out.println(answer);
        }
        out.flush();
    }

    private static String answer(String[] req) throws Exception {
        switch (req[0]) {
            case "parse": {
                String text = new String(Base64.getDecoder().decode(req[1]), StandardCharsets.UTF_8);
                ID id = IDFactory.fromURI(new URI(text));
                return "OK " + id + " " + kind(id) + " " + id.getIDFormat() + " " + str(group(id)) + " " + str(base(id));
            }
            case "gen":
                return gen(req[1]);
            case "new": {
                PeerGroupID g = (PeerGroupID) id(req[1]);
                return join(IDFactory.newPipeID(g), IDFactory.newPeerID(g), IDFactory.newPeerGroupID(g), IDFactory.newCodatID(g));
            }
            case "seed": {
                PeerGroupID g = (PeerGroupID) id(req[1]);
                byte[] seed = hex(req[2]);
                return join(IDFactory.newPipeID(g, seed), IDFactory.newPeerID(g, seed), IDFactory.newPeerGroupID(g, seed), IDFactory.newCodatID(g, seed));
            }
            case "seedroot": {
                byte[] seed = hex(req[1]);
                return join(IDFactory.newPeerGroupID(seed));
            }
            case "spec": {
                ModuleClassID c = (ModuleClassID) id(req[1]);
                return join(IDFactory.newModuleSpecID(c), IDFactory.newModuleClassID(c));
            }
            default:
                throw new IllegalArgumentException("unknown request " + req[0]);
        }
    }

    private static String gen(String format) throws Exception {
        PeerGroupID g = IDFactory.newPeerGroupID(format);
        ModuleClassID mc = IDFactory.newModuleClassID(format);
        byte[] content = new byte[1 + random.nextInt(100)];
        random.nextBytes(content);
        byte[] seed = new byte[random.nextInt(40)];
        random.nextBytes(seed);
        PeerGroupID net = PeerGroupID.defaultNetPeerGroupID;
        return join(g, IDFactory.newPeerGroupID(g), IDFactory.newPeerID(g), IDFactory.newPipeID(g),
            IDFactory.newCodatID(g), IDFactory.newCodatID(g, new ByteArrayInputStream(content)),
            mc, IDFactory.newModuleClassID(mc), IDFactory.newModuleSpecID(mc),
            IDFactory.newContentID(g, false), IDFactory.newContentID(g, true, seed),
            IDFactory.newPipeID(net), IDFactory.newPeerID(net), IDFactory.newPeerGroupID(net), IDFactory.newCodatID(net),
            IDFactory.newPeerGroupID(PeerGroupID.worldPeerGroupID));
    }

    private static ID id(String text) throws Exception {
        return IDFactory.fromURI(new URI(text));
    }

    private static byte[] hex(String s) {
        if (s.equals("-")) {
            return new byte[0];
        }
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    private static int kind(ID id) {
        if (id instanceof CodatID) return 1;
        if (id instanceof PeerGroupID) return 2;
        if (id instanceof PeerID) return 3;
        if (id instanceof PipeID) return 4;
        if (id instanceof ModuleClassID) return 5;
        if (id instanceof ModuleSpecID) return 6;
        if (id instanceof ContentID) return 7;
        return 0;
    }

    private static ID group(ID id) {
        if (id instanceof CodatID) return ((CodatID) id).getPeerGroupID();
        if (id instanceof PeerGroupID) return ((PeerGroupID) id).getParentPeerGroupID();
        if (id instanceof PeerID) return ((PeerID) id).getPeerGroupID();
        if (id instanceof PipeID) return ((PipeID) id).getPeerGroupID();
        if (id instanceof ContentID) return ((ContentID) id).getPeerGroupID();
        return null;
    }

    private static ID base(ID id) {
        if (id instanceof ModuleClassID) return ((ModuleClassID) id).getBaseClass();
        if (id instanceof ModuleSpecID) return ((ModuleSpecID) id).getBaseClass();
        return null;
    }

    private static String str(Object o) {
        return o == null ? "-" : o.toString();
    }

    private static String join(Object... ids) {
        StringBuilder b = new StringBuilder();
        for (Object o : ids) {
            if (b.length() > 0) b.append(' ');
            b.append(str(o));
        }
        return b.toString();
    }
}

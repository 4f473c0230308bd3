# Applied to the pages swift-argument-parser's generate-manual (1.8.2) writes, so that
# whatis(1)/apropos(1) index them and groff has nothing to warn about:
# - pages are named tidings-config-check(1), as git and systemd name theirs (the Makefile renames
#   the files; .Dt titles and .Xr references follow here);
# - NAME gives the page's own one-word name (tidings-config-check), as lexgrog(1) requires,
#   instead of the quoted command line; SYNOPSIS still shows the command as typed;
# - the one-line description loses its literal quotes;
# - an empty line (a paragraph break in the parser's discussion) becomes .Pp.
/^\.Sh NAME$/{
n
h
/^\.Nm "/{
s/ /-/g
s/^\.Nm-"\(.*\)"$/.Nm \1/
}
}
/^\.Sh SYNOPSIS$/{
n
/^\.Nm$/g
}
s/^\.Nd "\(.*\)"$/.Nd \1/
s/^$/.Pp/
:dash
s/^\(\.[DX][tr] "*[A-Za-z][A-Za-z0-9-]*\)\.\([A-Za-z]\)/\1-\2/
t dash

# package.cmake: what `cmake --install` puts where, and the Debian package
# `cpack` makes from it in the build directory (switchyard_<version>_<arch>.deb;
# docs/operating.md, "Install"). The policies are embedded in the binary; the
# copy in share/switchyard/policies is the starting point for edited ones.

option(SY_INSTALL_SERVICE "Install the systemd unit and /etc/default/switchyard" ON)
set(SY_UNIT_DIR "/lib/systemd/system" CACHE STRING "Where the systemd unit is installed")

install(TARGETS switchyard RUNTIME DESTINATION bin)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/policies/ DESTINATION share/switchyard/policies
        FILES_MATCHING PATTERN "*.lua")
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION share/doc/switchyard)
# what Debian wants beside every package's docs: the copyright file
# (machine-readable, DEP-5) and the changelog, compressed with gzip -9n (no
# name or time stamp in it, so the same source makes the same file).
# packaging/changelog is kept by hand: its top entry must be this version.
file(STRINGS ${CMAKE_SOURCE_DIR}/packaging/changelog SY_CHANGELOG_TOP LIMIT_COUNT 1)
if(NOT SY_CHANGELOG_TOP MATCHES "^switchyard \\(${PROJECT_VERSION}\\) ")
  message(WARNING "packaging/changelog starts with '${SY_CHANGELOG_TOP}', not version ${PROJECT_VERSION}: "
                  "add an entry for it")
endif()
install(FILES ${CMAKE_SOURCE_DIR}/packaging/copyright DESTINATION share/doc/switchyard)
install(CODE "execute_process(COMMAND gzip -9n -c \"${CMAKE_SOURCE_DIR}/packaging/changelog\"
                              OUTPUT_FILE \"${CMAKE_BINARY_DIR}/changelog.Debian.gz\" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR \"gzip of packaging/changelog failed: \${rc}\")
  endif()")
install(FILES ${CMAKE_BINARY_DIR}/changelog.Debian.gz DESTINATION share/doc/switchyard)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION share/doc/switchyard/docs)

if(SY_INSTALL_SERVICE)
  # ExecStart names the binary where this installation puts it, which is
  # known only when it runs (cpack installs under /usr, `cmake --install`
  # under the prefix it is given)
  install(CODE "set(SY_BINDIR \"\${CMAKE_INSTALL_PREFIX}/bin\")
    configure_file(\"${CMAKE_SOURCE_DIR}/packaging/switchyard.service.in\"
                   \"${CMAKE_BINARY_DIR}/switchyard.service\" @ONLY)")
  install(FILES ${CMAKE_BINARY_DIR}/switchyard.service DESTINATION ${SY_UNIT_DIR})
  install(FILES ${CMAKE_SOURCE_DIR}/packaging/switchyard.default
          DESTINATION /etc/default RENAME switchyard)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME switchyard)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "local-first LLM API gateway with failover across accounts")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "switchyard sits in front of a pool of upstream accounts (ChatGPT/Codex \
logins, OpenAI-style API keys, relay APIs) and moves a request to the next account within the same \
client request when one is rate limited or fails. Policies are Lua 5.4; state and request logs are \
kept in sqlite.")
set(SY_DEB_MAINTAINER "switchyard maintainers <switchyard@localhost>" CACHE STRING
    "Maintainer field of the .deb")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${SY_DEB_MAINTAINER}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# adduser: postinst creates the user; the shared libraries are added by
# dpkg-shlibdeps (dpkg-dev), else named here as Debian 12 ships them
find_program(SY_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(SY_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, libc6, libevent-2.1-7, libcurl4, libsqlite3-0, liblua5.4-0, \
lua-cjson, libwslay1, libzstd1, zlib1g, libssl3, libhiredis0.14")
endif()
# https upstreams need the CA certificates libcurl only recommends
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ca-certificates")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "sqlite3")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/postinst
    ${CMAKE_SOURCE_DIR}/packaging/prerm ${CMAKE_SOURCE_DIR}/packaging/postrm)
if(SY_INSTALL_SERVICE)
  list(APPEND CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/conffiles)
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

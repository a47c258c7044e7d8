# The jail helper (belljar-jail) carries only the jail: a static executable that needs no shared
# library at all, with nothing of ZMQ, OpenSSL or a JSON library in it, and none of iostreams'
# machinery (std::filesystem would bring it: sandbox/os/path_parts.hpp says why). The
# supervisor, as a control, does link ZMQ and the JSON library: a check that could not see them
# would pass anything. (OpenSSL is in neither: openssl_only_in_modules.cmake.)
# Run as: cmake -DHELPER=<belljar-jail> -DSUPERVISOR=<belljar> -P jail_helper_links_alone.cmake
function(symbols binary out)
  execute_process(COMMAND nm -C ${binary} OUTPUT_VARIABLE text RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "nm ${binary} failed (${status})")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

execute_process(COMMAND readelf -d ${HELPER} OUTPUT_VARIABLE dynamic)
if(dynamic MATCHES "NEEDED")
  string(REGEX MATCHALL "Shared library: \\[[^]]*\\]" needed "${dynamic}")
  message(FATAL_ERROR "belljar-jail needs shared libraries: ${needed}")
endif()

symbols(${HELPER} helper)
foreach(pattern "zmq_[a-z_]+" "SSL_[A-Za-z_]+" "EVP_[A-Za-z_]+" "nlohmann::" "std::basic_ostream"
        "std::locale::classic" "std::filesystem")
  string(REGEX MATCH "[^\n]*${pattern}[^\n]*" found "${helper}")
  if(found)
    message(FATAL_ERROR "belljar-jail links what it must not (${pattern}): ${found}")
  endif()
endforeach()

symbols(${SUPERVISOR} supervisor)
execute_process(COMMAND readelf -d ${SUPERVISOR} OUTPUT_VARIABLE supervisor_dynamic)
foreach(library libzmq)
  if(NOT supervisor_dynamic MATCHES "${library}")
    message(FATAL_ERROR "control failed: belljar itself does not link ${library}")
  endif()
endforeach()
if(NOT supervisor MATCHES "nlohmann::")
  message(FATAL_ERROR "control failed: no nlohmann symbol found in belljar")
endif()
message(STATUS "belljar-jail links no shared library, no ZMQ, OpenSSL or JSON library")

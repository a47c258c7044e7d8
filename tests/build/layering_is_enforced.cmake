# The build's layering check (scripts/check_layers.cmake, run for every library by
# belljar_layer()) refuses an include across the layers and accepts one along them.
# Run as: cmake -DSOURCE_DIR=<checkout> -DWORK=<scratch dir> -P layering_is_enforced.cmake
function(probe folder allowed include expect_refused)
  file(REMOVE_RECURSE ${WORK})
  if(include MATCHES "^<")
    file(WRITE ${WORK}/${folder}/probe.cpp "#include ${include}\n")
  else()
    file(WRITE ${WORK}/${folder}/probe.cpp "#include \"${include}\"\n")
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -DFOLDER=${folder} -DALLOWED=${allowed} "-DFORBIDDEN=${FORBIDDEN}"
            -DSOURCE_DIR=${WORK} -DSTAMP=${WORK}/stamp -P ${SOURCE_DIR}/scripts/check_layers.cmake
    RESULT_VARIABLE status ERROR_VARIABLE output)
  if(expect_refused)
    if(status EQUAL 0 OR NOT output MATCHES "refused:.*${folder}/probe.cpp")
      message(FATAL_ERROR "${folder} including ${include} was not refused (${status}): ${output}")
    endif()
  elseif(NOT status EQUAL 0)
    message(FATAL_ERROR "${folder} including ${include} was refused: ${output}")
  endif()
endfunction()

# The sandbox never reaches up into the kernel.
probe(sandbox/policy sandbox/policy,sandbox/os kernel/session/kernel.hpp TRUE)
probe(sandbox/jail sandbox/jail,sandbox/layers,sandbox/jail_protocol,sandbox/os
      kernel/protocol/signer.hpp TRUE)
# The jail helper's folders reach neither the supervisor's side nor its libraries.
probe(sandbox/jail sandbox/jail,sandbox/layers,sandbox/jail_protocol,sandbox/os
      sandbox/policy/policy.hpp TRUE)
set(FORBIDDEN "nlohmann/,zmq,openssl/")
probe(sandbox/layers sandbox/layers,sandbox/jail_protocol,sandbox/os <nlohmann/json.hpp> TRUE)
probe(sandbox/jail sandbox/jail,sandbox/os <openssl/evp.h> TRUE)
probe(sandbox/jail sandbox/jail,sandbox/os <zmq.h> TRUE)
probe(sandbox/jail sandbox/jail,sandbox/os <sys/mount.h> FALSE)
set(FORBIDDEN "")
# A front door never includes another.
probe(kernel/mcp kernel/mcp,kernel/session,kernel/protocol kernel/jupyter/jupyter_frontend.hpp TRUE)
# A layer below never includes one above.
probe(kernel/protocol kernel/protocol,sandbox/os kernel/session/frontend.hpp TRUE)
# A relative path would name any folder without the check seeing it.
probe(kernel/mcp kernel/mcp,kernel/session,kernel/protocol ../jupyter/jupyter_frontend.hpp TRUE)
probe(kernel/mcp kernel/mcp,kernel/session,kernel/protocol ./mcp_tools.hpp TRUE)
# Controls: along the declared layers, and system headers, pass.
probe(kernel/mcp kernel/mcp,kernel/session,kernel/protocol kernel/session/kernel.hpp FALSE)
probe(sandbox/jail sandbox/jail,sandbox/os sandbox/os/fd.hpp FALSE)
message(STATUS "layering: refused across layers and from the jail helper, accepted along them")
